import { describe, expect, it } from 'vitest';
import { until } from '../until.js';
import { expectError } from './expect-error.js';
import type { ModeContext } from './kit.js';

const STATUS_RANK: Record<string, number> = { pending: 0, processing: 1, completed: 2, failed: 2 };

async function inPool<T, R>(items: T[], width: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await work(items[i]!, i);
      }
    }),
  );
  return out;
}

/** Billing under concurrency: never more than the balance. */
export function defineBillingTests({ fx }: ModeContext): void {
  describe('billing under concurrency', () => {
    it('40 concurrent creates on a balance that covers 3 give exactly 3 x 201 and 37 x 402', async () => {
      const user = await fx.user(30);
      const replies = await Promise.all(Array.from({ length: 40 }, () => fx.create(user, { modelId: 'echo', settings: { prompt: 'race' } })));
      const created = replies.filter((r) => r.status === 201);
      const refused = replies.filter((r) => r.status === 402);
      expect(created).toHaveLength(3);
      expect(refused).toHaveLength(37);
      for (const r of refused) expectError(r, 402, 'insufficient_funds');
      expect(await fx.balance(user)).toBe(0);
      for (const r of created) expect((await fx.terminal(user, r.body.generationId)).status).toBe('completed');
      expect(await fx.balance(user)).toBe(0);
    });
  });
}

/** Generations only move forward, and hundreds reach the right terminal state. */
export function defineLifecycleTests({ fx, heavy }: ModeContext): void {
  describe('lifecycle', () => {
    it('never shows a generation moving backwards, and a terminal state never changes', async () => {
      const user = await fx.user(1000);
      const created = await Promise.all(
        Array.from({ length: 12 }, (_, i) => fx.create(user, { modelId: i % 3 === 0 ? 'slow' : 'flaky-slow' })),
      );
      const problems: string[] = [];
      await Promise.all(
        created.map(async (c) => {
          const id = c.body.generationId as string;
          const seen: string[] = [];
          let terminalText: string | undefined;
          let after = 0;
          // Read back to back until it is terminal, and 5 times more.
          const read = async (): Promise<boolean> => {
            const r = await fx.get(user, id);
            seen.push(r.body.status);
            const last = seen.length > 1 ? seen[seen.length - 2]! : 'pending';
            if (STATUS_RANK[r.body.status]! < STATUS_RANK[last]!) problems.push(`${id}: ${seen.join(' -> ')}`);
            if (terminalText !== undefined) {
              after++;
              if (r.text !== terminalText) problems.push(`${id}: terminal body changed from ${terminalText} to ${r.text}`);
            } else if (STATUS_RANK[r.body.status] === 2) {
              terminalText = r.text;
            }
            return after >= 5;
          };
          await until(read, { what: () => `${id} to be terminal and read 5 times more (seen: ${seen.slice(-3).join(', ')})`, timeoutMs: 15_000, intervalMs: 0 });
        }),
      );
      expect(problems).toEqual([]);
    });

    if (heavy) {
      it('runs 500 generations to a terminal state, each with the right shape and price', { timeout: 120_000 }, async () => {
        const user = await fx.user(1_000_000);
        const plan = ['noop', 'fail', 'flaky', 'slow', 'image', 'discount', 'crash', 'echo', 'video-put', 'flaky-slow'];
        const expected: Record<string, { status: string; price: number }> = {
          noop: { status: 'completed', price: 1 },
          fail: { status: 'failed', price: 2 },
          flaky: { status: 'completed', price: 3 },
          slow: { status: 'completed', price: 1 },
          image: { status: 'completed', price: 5 },
          discount: { status: 'completed', price: 6 },
          crash: { status: 'failed', price: 0 },
          echo: { status: 'completed', price: 10 },
          'video-put': { status: 'completed', price: 5 },
          'flaky-slow': { status: 'completed', price: 1 },
        };
        const models = Array.from({ length: 500 }, (_, i) => plan[i % plan.length]!);
        const ids = await inPool(models, 25, async (modelId) => {
          const r = await fx.create(user, modelId === 'echo' ? { modelId, settings: { prompt: 'p' } } : { modelId });
          if (r.status !== 201) throw new Error(`create ${modelId}: ${r.status} ${r.text}`);
          return r.body.generationId as string;
        });
        expect(new Set(ids).size).toBe(500);
        const views = await inPool(ids, 25, (id) => fx.terminal(user, id, 60_000));
        const problems: string[] = [];
        let spent = 0;
        views.forEach((view, i) => {
          const want = expected[models[i]!]!;
          spent += view.price ?? 0;
          if (view.status !== want.status || view.price !== want.price) problems.push(`${models[i]}: ${JSON.stringify(view)}`);
          if (view.status === 'failed' && 'result' in view) problems.push(`${models[i]}: failed with a result`);
          if (view.status === 'completed' && typeof view.result !== 'string') problems.push(`${models[i]}: completed without a result`);
        });
        expect(problems.slice(0, 10)).toEqual([]);
        expect(await fx.balance(user)).toBe(1_000_000 - spent);
      });
    }
  });
}
