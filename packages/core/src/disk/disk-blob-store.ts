import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { UnavailableError } from '../domain/errors.js';
import type { BlobStore, StoredBlob } from '../ports/blob.js';

export interface DiskBlobStoreOptions {
  /** Where files are kept; created on first use. */
  directory: string;
}

/**
 * Exactly what `put` hands out (32 random bytes, base64url). Every other string is refused before any path is
 * built from it, so no key can name a file outside the directory (no dots, no slashes, no encodings, no NUL).
 */
const KEY_PATTERN = /^[A-Za-z0-9_-]{43}$/;

interface Sidecar {
  mimeType: string;
}

/**
 * BlobStore on the local disk, the embedded default. Each blob is two files, `<key>` (the bytes) and
 * `<key>.json` (its mime type), under a two-character shard folder so no folder grows too large.
 *
 * Both files are written to a temp name, flushed and renamed, so a reader sees a whole file or none. The sidecar
 * is written first and deleted last: a blob whose bytes exist always has its mime type.
 *
 * The disk is this store's backing service: a file system that fails (full, read-only, unreadable, gone) is thrown as
 * `UnavailableError`, as the port asks, so a result that cannot be kept fails its generation free (`storage_unavailable`)
 * after the runner's retries, and a read answers 503, never 500 or a charge for the provider's work.
 */
export class DiskBlobStore implements BlobStore {
  private readonly directory: string;

  constructor(options: DiskBlobStoreOptions) {
    this.directory = options.directory;
  }

  async put(bytes: Uint8Array, mimeType: string): Promise<string> {
    const key = randomBytes(32).toString('base64url');
    const paths = this.pathsOf(key);
    const sidecar: Sidecar = { mimeType };
    try {
      await mkdir(paths.shard, { recursive: true });
      await writeAtomically(paths.meta, new TextEncoder().encode(JSON.stringify(sidecar)));
      await writeAtomically(paths.data, bytes);
    } catch (error) {
      // Nothing half-written stays readable: the bytes are published last, and a sidecar alone is no blob.
      throw diskFailure('written', error);
    }
    await syncDirectory(paths.shard);
    return key;
  }

  async get(key: string): Promise<StoredBlob | null> {
    if (!isKey(key)) return null;
    const paths = this.pathsOf(key);
    const bytes = await readOrNull(paths.data);
    if (bytes === null) return null;
    const meta = await readOrNull(paths.meta);
    if (meta === null) return null;
    const sidecar = JSON.parse(Buffer.from(meta).toString('utf8')) as Partial<Sidecar>;
    if (typeof sidecar.mimeType !== 'string') throw new Error(`Blob ${key} has a corrupt sidecar`);
    return { bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), mimeType: sidecar.mimeType };
  }

  async delete(key: string): Promise<void> {
    if (!isKey(key)) return;
    const paths = this.pathsOf(key);
    try {
      await rm(paths.data, { force: true });
      await rm(paths.meta, { force: true });
    } catch (error) {
      throw diskFailure('deleted from', error);
    }
  }

  async deleteMany(keys: readonly string[]): Promise<void> {
    // A few at a time: enough to overlap the disk's latency, few enough never to exhaust file handles.
    for (let i = 0; i < keys.length; i += 16) await Promise.all(keys.slice(i, i + 16).map((key) => this.delete(key)));
  }

  private pathsOf(key: string): { shard: string; data: string; meta: string } {
    const shard = join(this.directory, key.slice(0, 2));
    return { shard, data: join(shard, key), meta: join(shard, `${key}.json`) };
  }
}

function isKey(key: unknown): key is string {
  return typeof key === 'string' && KEY_PATTERN.test(key);
}

async function writeAtomically(path: string, bytes: Uint8Array): Promise<void> {
  const temp = `${path}.${randomBytes(8).toString('hex')}.tmp`;
  try {
    const handle = await open(temp, 'wx');
    try {
      await handle.writeFile(bytes);
      // "put is durable once it resolves": the bytes must reach the disk before the rename publishes them.
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, path);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}

/** Makes the renames durable too. Not every platform can open a folder for syncing (Windows), so failures pass. */
async function syncDirectory(path: string): Promise<void> {
  try {
    const handle = await open(path, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // best effort: the file contents are already synced
  }
}

async function readOrNull(path: string): Promise<Buffer | null> {
  try {
    return await readFile(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw diskFailure('read', error);
  }
}

/** A file system error as the port's outage: its code in the message (never the path, which is the host's). */
function diskFailure(what: 'written' | 'read' | 'deleted from', error: unknown): UnavailableError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return new UnavailableError(`The blob directory could not be ${what}${code ? ` (${code})` : ''}.`, { cause: error });
}
