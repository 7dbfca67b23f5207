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

  /** The path and query below the mount point, e.g. `/v1/files/KEY?exp=...&sig=...`. */
  sign(key: string, nowMs: number, notAfterMs?: number): string {
    // Expiry is rounded up to the minute so that repeated reads within a minute give the same URL (cacheable), but
    // never past `notAfterMs` (the generation's own expiry).
    const rounded = Math.ceil((nowMs / 1000 + this.ttlSeconds) / 60) * 60;
    const exp = notAfterMs === undefined ? rounded : Math.min(rounded, Math.floor(notAfterMs / 1000));
    return `/v1/files/${encodeURIComponent(key)}?exp=${exp}&sig=${this.mac(key, exp).toString('base64url')}`;
  }

  /** A tag binding a file to its owner (an upload's `owner` query parameter): unforgeable without the secret. */
  ownerTag(key: string, userId: string): string {
    return createHmac('sha256', this.secret).update(`upload\n${userId}\n${key}`).digest('base64url');
  }

  verify(key: string, exp: string | null, sig: string | null, nowMs: number): boolean {
    if (!exp || !sig || !/^\d{1,12}$/.test(exp) || !/^[A-Za-z0-9_-]{43}$/.test(sig)) return false;
    const expNum = Number(exp);
    if (expNum * 1000 < nowMs) return false;
    // The canonical spelling is compared, not the decoded bytes: the last of 43 characters carries 2 unused bits, so
    // decoding would accept four spellings of one signature (and four cache keys for one file).
    const given = Buffer.from(sig, 'latin1');
    const want = Buffer.from(this.mac(key, expNum).toString('base64url'), 'latin1');
    return given.length === want.length && timingSafeEqual(given, want);
  }
}
