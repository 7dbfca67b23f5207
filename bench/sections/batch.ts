/**
 * Issue 29: "batch of 1,000: time to all created". One `POST /v1/batches` of 1,000 requests (`service.batches.create`:
 * validated, reserved in one ledger call, stored in one transaction with multi-row inserts, enqueued) against the
 * same 1,000 generations created one by one (`service.create`), on the in-memory, SQLite and Postgres stores. The
 * runner is off: only the create is timed, from the call to the answer (all 1,000 stored and enqueued).
 */
import path from 'node:path';
import pg from 'pg';
import { createGenerationService, MemoryLedger, type GenerationService } from '@genservice/core';
import type { GenerationStore, IdempotencyStore, Ledger } from '@genservice/core/ports';
import { createPostgresStores } from '@genservice/store-postgres';
import { createSqliteStores } from '@genservice/store-sqlite';
import { throwawayDatabase } from './stores.js';

export const BATCH_SIZE = 1000;

export interface BatchTimes {
  /** Best of the rounds, ms: one batch of 1,000. */
  batchMs: number;
  /** Best of the rounds, ms: 1,000 single creates, one after another. */
  singlesMs: number;
}

function service(ports: { store?: GenerationStore; ledger: Ledger; idempotency?: IdempotencyStore }): GenerationService {
  return createGenerationService({
    providers: [
      {
        models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text' }], price: 1 }],
        generate: async () => ({ text: 'x' }),
      },
    ],
    ...ports,
    limits: { inFlightPerUser: 1_000_000 },
    runner: { enabled: false },
    recovery: { onStart: false, intervalMs: 0 },
  });
}

async function measure(make: (round: number) => Promise<{ svc: GenerationService; credit: (user: string) => Promise<void>; close: () => Promise<void> }>, rounds: number): Promise<BatchTimes> {
  const requests = Array.from({ length: BATCH_SIZE }, (_, i) => ({ modelId: 'm', settings: { prompt: `p${i}` } }));
  let batchMs = Infinity;
  let singlesMs = Infinity;
  for (let round = 0; round < rounds; round++) {
    const { svc, credit, close } = await make(round);
    try {
      const a = `batch-${round}`;
      const b = `single-${round}`;
      await credit(a);
      await credit(b);
      let t0 = performance.now();
      const { generationIds } = await svc.batches.create(a, { requests });
      batchMs = Math.min(batchMs, performance.now() - t0);
      if (generationIds.length !== BATCH_SIZE) throw new Error('batch bench: not every generation was created');
      t0 = performance.now();
      for (const r of requests) await svc.create(b, r);
      singlesMs = Math.min(singlesMs, performance.now() - t0);
    } finally {
      await close();
    }
  }
  return { batchMs, singlesMs };
}

export async function batchBench(dir: string, rounds: number): Promise<{ memory: BatchTimes; sqlite: BatchTimes; postgres: BatchTimes }> {
  const memory = await measure(async () => {
    const ledger = new MemoryLedger();
    const svc = service({ ledger });
    return { svc, credit: (u) => ledger.credit(u, BATCH_SIZE), close: () => svc.stop() };
  }, rounds);
  const sqlite = await measure(async (round) => {
    const stores = createSqliteStores({ filename: path.join(dir, `batch-${round}.db`) });
    const svc = service({ store: stores.store, ledger: stores.ledger, idempotency: stores.idempotency });
    return { svc, credit: (u) => stores.ledger.credit(u, BATCH_SIZE), close: async () => (await svc.stop(), await stores.close()) };
  }, rounds);
  const db = await throwawayDatabase();
  const pool = new pg.Pool({ connectionString: db.url, max: 4 });
  try {
    const postgres = await measure(async (round) => {
      const stores = await createPostgresStores({ pool, schema: `batch_${round}` });
      const svc = service({ store: stores.store, ledger: stores.ledger, idempotency: stores.idempotency });
      return { svc, credit: (u) => stores.ledger.credit(u, BATCH_SIZE), close: () => svc.stop() };
    }, rounds);
    return { memory, sqlite, postgres };
  } finally {
    await pool.end();
    await db.drop();
  }
}
