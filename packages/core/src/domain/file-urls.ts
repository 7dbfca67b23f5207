import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Signs file URLs: HMAC-SHA256 over key and expiry, so a URL can be neither guessed nor altered,
 * and stops working after its expiry.
 */
export class FileUrlSigner {
  private readonly secret: Buffer;

  /** Without a secret, a random one: URLs then work on this process only. */
  constructor(
    secret: string | undefined,
    private readonly ttlSeconds: number,
  ) {
    this.secret = secret ? Buffer.from(secret, 'utf8') : randomBytes(32);
  }

  private mac(key: string, exp: number): Buffer {
    return createHmac('sha256', this.secret).update(`${key}\n${exp}`).digest();
  }

  /**
   * The path and query below the mount point, e.g. `/v1/files/KEY?exp=...&sig=...`; with `ownerId`, also the file's
   * owner tag (`&owner=...`), which is what lets a create take the URL as one of its owner's inputs (see `read`).
   */
  sign(key: string, nowMs: number, notAfterMs?: number, ownerId?: string): string {
    // Expiry is rounded up to the minute so that repeated reads within a minute give the same URL (cacheable), but
    // never past `notAfterMs` (the generation's own expiry).
    const rounded = Math.ceil((nowMs / 1000 + this.ttlSeconds) / 60) * 60;
    const exp = notAfterMs === undefined ? rounded : Math.min(rounded, Math.floor(notAfterMs / 1000));
    const owner = ownerId === undefined ? '' : `&owner=${this.ownerTag(key, ownerId)}`;
    return `/v1/files/${encodeURIComponent(key)}?exp=${exp}&sig=${this.mac(key, exp).toString('base64url')}${owner}`;
  }

  /** A tag binding a file to its owner (an upload's `owner` query parameter): unforgeable without the secret. */
  ownerTag(key: string, userId: string): string {
    return createHmac('sha256', this.secret).update(`upload\n${userId}\n${key}`).digest('base64url');
  }

  verify(key: string, exp: string | null, sig: string | null, nowMs: number): boolean {
    return this.check(key, exp, sig, nowMs) === 'valid';
  }

  /** `verify`, telling an expired link (signed by this service) from one it never signed. */
  check(key: string, exp: string | null, sig: string | null, nowMs: number): 'valid' | 'expired' | 'forged' {
    if (!exp || !sig || !/^\d{1,12}$/.test(exp) || !/^[A-Za-z0-9_-]{43}$/.test(sig)) return 'forged';
    const expNum = Number(exp);
    // The canonical spelling is compared, not the decoded bytes: the last of 43 characters carries 2 unused bits, so
    // decoding would accept four spellings of one signature (and four cache keys for one file).
    const given = Buffer.from(sig, 'latin1');
    const want = Buffer.from(this.mac(key, expNum).toString('base64url'), 'latin1');
    if (!(given.length === want.length && timingSafeEqual(given, want))) return 'forged';
    return expNum * 1000 < nowMs ? 'expired' : 'valid';
  }

  /**
   * What a URL is, if it has the shape of a file URL of a genservice (`<base>/v1/files/<key>?exp&sig[&owner]`):
   * its base (origin and mount path), key, expiry and whether this service signed it. null for any other URL.
   */
  read(url: string, nowMs: number): FileReference | null {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return null;
    }
    const m = /^(.*)\/v1\/files\/([^/]+)$/.exec(parsed.pathname);
    if (!m || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) return null;
    let key: string;
    try {
      key = decodeURIComponent(m[2]!);
    } catch {
      return null;
    }
    const exp = parsed.searchParams.get('exp');
    const state = this.check(key, exp, parsed.searchParams.get('sig'), nowMs);
    return { base: `${parsed.origin}${m[1]}`, key, expiresAt: Number(exp) * 1000, state, owner: parsed.searchParams.get('owner') };
  }

  /** Whether a file URL's owner tag is `userId`'s (compared in constant time). */
  ownedBy(ref: FileReference, userId: string): boolean {
    const given = Buffer.from(ref.owner ?? '', 'latin1');
    const want = Buffer.from(this.ownerTag(ref.key, userId), 'latin1');
    return given.length === want.length && timingSafeEqual(given, want);
  }
}

/** A URL with the shape of a service's file URL, as `FileUrlSigner.read` reads it. */
export interface FileReference {
  /** Origin and mount path, without a trailing slash: `https://api.example.com/gen`. */
  base: string;
  key: string;
  /** Epoch ms the link stops working (NaN when it names none). */
  expiresAt: number;
  /** `valid`: signed by this service and unexpired; `expired`: signed by it, past its expiry; `forged`: not signed by it. */
  state: 'valid' | 'expired' | 'forged';
  /** Its `owner` query parameter (null when it has none). */
  owner: string | null;
}

/**
 * Whether a media setting's URL may be given by `userId`, and why not (a sentence for a 400), as the rule every
 * create, quote and batch asks. A URL of this service's files (under `ownBase`, or signed by it wherever it points)
 * must be one of the caller's own (an upload or a generation's file, with the caller's owner tag) and unexpired;
 * any other URL is not this rule's concern (`ownBase`, a string or a function asked only for a link of that shape) (it goes through the outbound guard when a model fetches it).
 */
export function fileReferenceRefusal(
  url: string,
  userId: string,
  signer: FileUrlSigner,
  nowMs: number,
  ownBase?: string | (() => string | undefined),
): string | undefined {
  const ref = signer.read(url, nowMs);
  if (ref === null) return undefined;
  // Asked only for a link of a file URL's shape: the request's base may be costly (or not to be read) otherwise.
  const base = typeof ownBase === 'function' ? ownBase() : ownBase;
  const ours = base !== undefined && ref.base === base.replace(/\/+$/, '');
  if (ref.state === 'forged') return ours ? 'is not a valid file link of this service (its signature does not match)' : undefined;
  if (ref.state === 'expired') return `is a file link that expired at ${new Date(ref.expiresAt).toISOString()} (upload the file again)`;
  if (!signer.ownedBy(ref, userId)) return "is not one of your files (a link to another user's upload or result, or one without its owner tag)";
  return undefined;
}
