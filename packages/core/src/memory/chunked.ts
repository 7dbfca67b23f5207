/** log2 of the numbers a `NumberBlocks` block holds: 4,096 (32 KB). */
const SHIFT = 12;
const SIZE = 1 << SHIFT;
const MASK = SIZE - 1;

/** log2 of the values a column chunk holds: 16,384, 128 KB of slots, past the size V8 copies between generations. */
const COLUMN_SHIFT = 14;
const COLUMN_SIZE = 1 << COLUMN_SHIFT;
const COLUMN_MASK = COLUMN_SIZE - 1;
/** The first chunk's first length: a small store stays small. */
const FIRST_SIZE = 64;

/** What a chunk is: an array of values (`objectSlots`), or a Float64Array of numbers (`numberSlots`: no GC reads it). */
export interface Slots<T> {
  readonly length: number;
  [i: number]: T;
  fill(value: T, start?: number): unknown;
}

export const objectSlots = <T>(length: number): Slots<T> => new Array<T>(length);
export const numberSlots = (length: number): Slots<number> => new Float64Array(length);

/**
 * A list kept in chunks of 16,384 values, for what the memory store keeps for good (the feed's columns, an owner's
 * generations). One array would grow by copying itself into one half as large again: at millions of slots every growth
 * allocates the whole array anew, outside the young generation, on fresh pages, and leaves the old one to a full GC.
 * The first chunk doubles as it fills (from 64); every later one is made at its full size, an object too large for the
 * young generation's copying: it is never copied, only filled. Issue 36: with the feed in one array per column, the
 * feed was about 640 bytes a generation of what the young-generation GC copied.
 */
export class Chunked<T> {
  private readonly chunks: Array<Slots<T>>;
  private size = 0;

  /** `make`: `objectSlots` or `numberSlots`. */
  constructor(private readonly make: (length: number) => Slots<T>) {
    this.chunks = [make(FIRST_SIZE)];
  }

  get length(): number {
    return this.size;
  }

  push(value: T): void {
    const i = this.size++;
    let chunk = this.chunks[i >>> COLUMN_SHIFT];
    if (chunk === undefined) this.chunks.push((chunk = this.make(COLUMN_SIZE)));
    else if (i < COLUMN_SIZE && i === chunk.length) chunk = this.growFirst(chunk);
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
    this.chunks[count - 1]!.fill(undefined as T, n - (count - 1) * COLUMN_SIZE);
    this.size = n;
  }

  private growFirst(first: Slots<T>): Slots<T> {
    const grown = this.make(first.length * 2);
    for (let k = 0; k < first.length; k++) grown[k] = first[k]!;
    this.chunks[0] = grown;
    return grown;
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
