import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { runImageTask, type EncodePngTask, type FitPngResult, type FitPngTask, type ImageTask } from './image-tasks.js';

export interface ImageWorkerPoolOptions {
  /**
   * Worker threads (default: the number of cores minus one, at least 1, at most 4). 0 runs every task inline on
   * the calling thread (blocking the event loop for its length: for scripts, not servers).
   */
  size?: number;
}

interface Pending {
  slot: Slot;
  resolve(value: unknown): void;
  reject(error: Error): void;
}

interface Slot {
  worker: Worker;
  inFlight: number;
}

/** Starts the worker script beside this module: built JavaScript, or TypeScript (from source, through tsx). */
function newWorker(): Worker {
  const here = import.meta.url;
  const ext = here.endsWith('.ts') ? '.ts' : here.endsWith('.cjs') ? '.cjs' : '.js';
  // Built bundles put both entries in dist/; the source keeps the worker beside this file.
  const url = new URL(`./image-worker${ext}`, here);
  if (ext !== '.ts') return new Worker(url);
  // Running from source (tests, `--conditions=@genservice/source`): register tsx's loader in the worker first.
  // The ES module build of tsx's API (`tsx/esm/api` under the import condition; require() would give the CJS one).
  const tsxPackage = createRequire(here).resolve('tsx/package.json');
  const exportsMap = (createRequire(here)(tsxPackage) as { exports: Record<string, { import: { default: string } }> }).exports;
  const api = new URL(exportsMap['./esm/api']!.import.default, pathToFileURL(tsxPackage)).href;
  return new Worker(`import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(url.href)}); });`, {
    eval: true,
  });
}

/**
 * A small pool of worker threads for the demo models' image decoding and encoding, so that a large input image
 * (or many at once) takes a core of its own instead of stalling every other request on the event loop. Workers
 * start on first use and do not keep the process alive while idle.
 */
export class ImageWorkerPool {
  readonly size: number;
  private readonly slots: Slot[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;

  constructor(options: ImageWorkerPoolOptions = {}) {
    const size = options.size ?? Math.min(4, Math.max(1, availableParallelism() - 1));
    if (!Number.isInteger(size) || size < 0) throw new RangeError(`size must be an integer >= 0, got ${size}`);
    this.size = size;
  }

  private started = 0;

  /** Tasks sent to a worker and not answered yet. */
  get busy(): number {
    return this.pending.size;
  }

  /** Tasks run since the pool was made (inline ones included). */
  get tasksStarted(): number {
    return this.started;
  }

  /** Decodes a PNG and fits it to width x height (cover, centre crop), or says why it could not be decoded. */
  fitPng(task: Omit<FitPngTask, 'task'>): Promise<FitPngResult> {
    return this.run({ task: 'fitPng', ...task }) as Promise<FitPngResult>;
  }

  /** Encodes RGBA pixels as a PNG. */
  encodePng(task: Omit<EncodePngTask, 'task'>): Promise<Uint8Array> {
    return this.run({ task: 'encodePng', ...task }) as Promise<Uint8Array>;
  }

  /** Stops the workers; tasks still running are rejected. */
  async close(): Promise<void> {
    this.closed = true;
    const slots = this.slots.splice(0);
    await Promise.all(slots.map((s) => s.worker.terminate()));
    for (const p of this.pending.values()) p.reject(new Error('the image worker pool was closed'));
    this.pending.clear();
  }

  private run(task: ImageTask): Promise<unknown> {
    this.started++;
    if (this.size === 0) {
      try {
        return Promise.resolve(runImageTask(task));
      } catch (error) {
        return Promise.reject(error);
      }
    }
    if (this.closed) return Promise.reject(new Error('the image worker pool was closed'));
    const slot = this.pick();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, {
        slot,
        resolve: (v) => {
          this.done(slot);
          resolve(v);
        },
        reject: (e) => {
          this.done(slot);
          reject(e);
        },
      });
      slot.inFlight++;
      slot.worker.ref();
      // Input bytes are copied (the caller may still hold them); results come back transferred.
      slot.worker.postMessage({ id, task });
    });
  }

  private done(slot: Slot): void {
    slot.inFlight--;
    if (slot.inFlight === 0) slot.worker.unref();
  }

  /** The least busy worker, starting another while there is room. */
  private pick(): Slot {
    const idle = this.slots.find((s) => s.inFlight === 0);
    if (idle) return idle;
    if (this.slots.length < this.size) return this.start();
    return this.slots.reduce((a, b) => (b.inFlight < a.inFlight ? b : a));
  }

  private start(): Slot {
    const worker = newWorker();
    const slot: Slot = { worker, inFlight: 0 };
    worker.unref();
    worker.on('message', (message: { id: number; result?: unknown; error?: string }) => {
      const p = this.pending.get(message.id);
      if (!p) return;
      this.pending.delete(message.id);
      if (message.error !== undefined) p.reject(new Error(message.error));
      else p.resolve(message.result);
    });
    worker.on('error', (error) => this.lose(slot, error));
    worker.on('exit', (code) => {
      if (!this.closed) this.lose(slot, new Error(`an image worker exited (code ${code})`));
    });
    this.slots.push(slot);
    return slot;
  }

  /** A worker died: its tasks fail (the run fails with a reason), and the next task starts a new worker. */
  private lose(slot: Slot, error: Error): void {
    const i = this.slots.indexOf(slot);
    if (i === -1) return;
    this.slots.splice(i, 1);
    for (const [id, p] of this.pending) {
      if (p.slot !== slot) continue;
      this.pending.delete(id);
      p.reject(error);
    }
    void slot.worker.terminate();
  }
}
