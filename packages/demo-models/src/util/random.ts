import { createHash } from 'node:crypto';

/**
 * A small seeded PRNG (sfc32). Demo output must be byte-identical for identical settings, so nothing may use
 * Math.random; the integer-only generator also gives the same stream on every platform.
 */
export class Random {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: Uint8Array) {
    const view = new DataView(seed.buffer, seed.byteOffset, seed.byteLength);
    this.a = view.getUint32(0, false);
    this.b = view.getUint32(4, false);
    this.c = view.getUint32(8, false);
    this.d = view.getUint32(12, false) | 1;
    // The first outputs of sfc32 are still correlated with the seed words.
    for (let i = 0; i < 12; i++) this.nextUint32();
  }

  nextUint32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform in [min, max). */
  range(min: number, max: number): number {
    return min + (max - min) * this.next();
  }

  /** Integer in [min, max] inclusive. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)];
  }

  chance(probability: number): boolean {
    return this.next() < probability;
  }
}

/** SHA-256 over the parts, each length-prefixed so that ("ab","c") and ("a","bc") differ. */
export function digest(...parts: Array<string | Uint8Array>): Uint8Array {
  const hash = createHash('sha256');
  for (const part of parts) {
    const bytes = typeof part === 'string' ? Buffer.from(part, 'utf8') : part;
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    hash.update(length);
    hash.update(bytes);
  }
  return new Uint8Array(hash.digest());
}

/** A generator seeded from a model id and its settings, so each model gets its own stream for the same prompt. */
export function seededRandom(...parts: Array<string | Uint8Array>): Random {
  return new Random(digest(...parts));
}

/**
 * Settings in a canonical order, so `{ a, b }` and `{ b, a }` seed the same output. Only the values the model uses
 * are passed in, which keeps unrelated keys from changing the bytes.
 */
export function canonicalSettings(values: Record<string, string | readonly string[]>): string {
  const keys = Object.keys(values).sort();
  return JSON.stringify(keys.map((key) => [key, values[key]]));
}
