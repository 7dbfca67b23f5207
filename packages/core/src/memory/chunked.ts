/** log2 of the numbers a `NumberBlocks` block holds: 4,096 (32 KB). */
const SHIFT = 12;
const SIZE = 1 << SHIFT;
const MASK = SIZE - 1;

/** log2 of the values a column chunk holds: 16,384, 128 KB of slots, past the size V8 copies between generations. */
const COLUMN_SHIFT = 14;
const COLUMN_SIZE = 1 << COLUMN_SHIFT;
const COLUMN_MASK = COLUMN_SIZE - 1;

/**
 * A list kept in chunks of 16,384 values, for what the memory store keeps for good (the feed's columns, an owner's
 * generations). One array would grow by copying itself into one half as large again: at millions of slots every growth
 * allocates the whole array anew, outside the young generation, on fresh pages, and leaves the old one to a full GC.
 * The first chunk grows as an array does (a small store stays small); every later one is made at its full size, an
 * object too large for the young generation's copying: it is never copied, only filled. Issue 36: with the feed in
 * one array per column, the feed was about 640 bytes a generation of what the young-generation GC copied.
 */
export class Chunked<T> {
  private readonly chunks: T[][];
  private readonly first: T[] = [];
  private size = 0;

  constructor() {
    this.chunks = [this.first];
  }

  get length(): number {
    return this.size;
  }

  push(value: T): void {
    const i = this.size++;
    if (i < COLUMN_SIZE) {
      this.first.push(value);
      return;
    }
    let chunk = this.chunks[i >>> COLUMN_SHIFT];
    if (chunk === undefined) this.chunks.push((chunk = new Array<T>(COLUMN_SIZE)));
    chunk[i & COLUMN_MASK] = value;
  }

  /** The value at `i` (0 <= i < length). */
  at(i: number): T {
    return this.chunks[i >>> COLUMN_SHIFT]![i & COLUMN_MASK]!;
  }

  set(i: number, value: T): void {
    this.chunks[i >>> COLUMN_SHIFT]![i & COLUMN_MASK] = value;
  }

  /** Keeps the first `n` values (n <= length); what it drops is no longer referenced. */
  truncate(n: number): void {
    const count = Math.max(1, (n + COLUMN_MASK) >>> COLUMN_SHIFT);
    this.chunks.length = count;
    if (n <= COLUMN_SIZE) this.first.length = n;
    else this.chunks[count - 1]!.fill(undefined as T, ((n - 1) & COLUMN_MASK) + 1);
    this.size = n;
  }
}

/**
 * A list of numbers in chunks of a Float64Array each (bytes no GC reads or copies, and no box per number): the first
 * chunk doubles as it fills, the later ones are made at their full 16,384.
 */
export class NumberColumn {
  private readonly chunks: Float64Array[] = [new Float64Array(64)];
  private size = 0;

  get length(): number {
    return this.size;
  }

  push(value: number): void {
    const i = this.size++;
    const c = i >>> COLUMN_SHIFT;
    let chunk = this.chunks[c];
    if (chunk === undefined) this.chunks.push((chunk = new Float64Array(COLUMN_SIZE)));
    else if (c === 0 && i === chunk.length) {
      const grown = new Float64Array(chunk.length * 2);
      grown.set(chunk);
      this.chunks[0] = chunk = grown;
    }
    chunk[i & COLUMN_MASK] = value;
  }

  at(i: number): number {
    return this.chunks[i >>> COLUMN_SHIFT]![i & COLUMN_MASK]!;
  }

  set(i: number, value: number): void {
    this.chunks[i >>> COLUMN_SHIFT]![i & COLUMN_MASK] = value;
  }

  /** Keeps the first `n` values (n <= length). */
  truncate(n: number): void {
    this.chunks.length = Math.max(1, (n + COLUMN_MASK) >>> COLUMN_SHIFT);
    this.size = n;
  }
}

/**
 * Numbers in fixed blocks of a Float64Array each (bytes no GC reads, and no box per number), handed out a run of
 * `width` at a time; a run never spans two blocks. A freed run is handed out again.
 */
export class NumberBlocks {
  private readonly blocks: Float64Array[] = [];
  private next = 0;
  private readonly freed: number[] = [];

  constructor(private readonly width: number) {}

  /** A run of `width` numbers, each NaN; answers its index (its block is `blockOf(index)`, at `index & BLOCK_MASK`). */
  take(): number {
    let at = this.freed.pop();
    if (at === undefined) {
      if ((this.next & MASK) + this.width > SIZE) this.next = (this.next + MASK) & ~MASK;
      at = this.next;
      this.next += this.width;
      if (at >>> SHIFT === this.blocks.length) this.blocks.push(new Float64Array(SIZE));
    }
    this.blocks[at >>> SHIFT]!.fill(Number.NaN, at & MASK, (at & MASK) + this.width);
    return at;
  }

  blockOf(at: number): Float64Array {
    return this.blocks[at >>> SHIFT]!;
  }

  free(at: number): void {
    this.freed.push(at);
  }
}

/** Where index `at` of a `NumberBlocks` is in its block. */
export const BLOCK_MASK = MASK;
