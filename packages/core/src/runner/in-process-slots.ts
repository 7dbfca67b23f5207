import type { FairLine } from '../domain/fair-order.js';
import type { Job } from '../ports/queue.js';

/** The in-process queue's parts: the slots of its limits and the heaps of its waiting jobs (in-process-queue.ts). */

/**
 * Slots of a limit: how many jobs hold one, against how many may; a lane's are paused while its upstream asked to wait.
 * Counters only: the fair choice of which job takes a free slot is the queue's, and a job runs as soon as it has its
 * slots (no promise, task wrapper or event per job).
 */
export class Slots {
  active = 0;
  paused = false;
  private idle: Array<() => void> = [];
  constructor(public concurrency: number) {}
  /** Slots a job could take now (0 while paused). */
  get free(): number {
    return this.paused ? 0 : Math.max(0, this.concurrency - this.active);
  }
  get full(): boolean {
    return this.paused || this.active >= this.concurrency;
  }
  take(): void {
    this.active++;
  }
  give(): void {
    this.active--;
    if (this.active === 0 && this.idle.length > 0) for (const resolve of this.idle.splice(0)) resolve();
  }
  /** Resolves when no job holds a slot. */
  onIdle(): Promise<void> {
    return this.active === 0 ? Promise.resolve() : new Promise((resolve) => this.idle.push(resolve));
  }
}

/** A waiting job and its place in the fair order (band, then order, then arrival). */
export interface Waiting {
  job: Job;
  line: FairLine;
  order: number;
  seq: number;
}

export function before(a: Waiting, b: Waiting): boolean {
  if (a.line.band !== b.line.band) return a.line.band < b.line.band;
  if (a.order !== b.order) return a.order < b.order;
  return a.seq < b.seq;
}

/** A binary min-heap of waiting jobs (one per band and model: the jobs of a model at its limit are skipped, not waited on). */
export class Heap {
  readonly items: Waiting[] = [];
  get head(): Waiting | undefined {
    return this.items[0];
  }
  push(w: Waiting): void {
    const a = this.items;
    a.push(w);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(a[i]!, a[p]!)) break;
      swap(a, i, p);
      i = p;
    }
  }
  pop(): Waiting | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && before(a[l]!, a[m]!)) m = l;
        if (r < a.length && before(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        swap(a, i, m);
        i = m;
      }
    }
    return top;
  }
}


/** Swaps two entries in place (not by destructuring, which builds an array per swap where V8 does not optimise it away: issue 36). */
function swap(a: Waiting[], i: number, j: number): void {
  const t = a[i]!;
  a[i] = a[j]!;
  a[j] = t;
}
