import type { Job, JobSignal } from '@genservice/core/ports';

/** What the queue contract's handler saw, and the levers that let its held runs go. */
export interface Recorder {
  /** Generation ids in the order the queue handed them out. */
  seen: string[];
  running: Set<string>;
  maxRunning: number;
  signals: Map<string, JobSignal>;
  /** Lets every run through, now and later. */
  release(): void;
  /** Lets the oldest waiting run through. */
  releaseOne(): void;
  handler: (job: Job, signal: JobSignal) => Promise<void>;
}

/** Records every handler call; with `hold`, each run waits until the test lets it go (all at once, or the oldest). */
export function recorder(hold = false): Recorder {
  let open = !hold;
  const waiting: Array<() => void> = [];
  const state = {
    seen: [] as string[],
    running: new Set<string>(),
    maxRunning: 0,
    signals: new Map<string, JobSignal>(),
    release: (): void => {
      open = true;
      for (const letGo of waiting.splice(0)) letGo();
    },
    releaseOne: (): void => waiting.shift()?.(),
    handler: async (j: Job, signal: JobSignal): Promise<void> => {
      state.seen.push(j.generationId);
      state.signals.set(j.generationId, signal);
      state.running.add(j.generationId);
      state.maxRunning = Math.max(state.maxRunning, state.running.size);
      try {
        if (!open) await new Promise<void>((resolve) => waiting.push(resolve));
        // One turn of the event loop, so that runs overlap as real jobs do.
        await new Promise((resolve) => setImmediate(resolve));
      } finally {
        state.running.delete(j.generationId);
      }
    },
  };
  return state;
}

