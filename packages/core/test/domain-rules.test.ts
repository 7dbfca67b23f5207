import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isBatchDone } from '../src/domain/batches.js';
import { DomainError } from '../src/domain/errors.js';
import { completionCharge, type FailureCause, failurePrice, failureRule } from '../src/domain/fees.js';
import { decodeCursor, encodeCursor, readPage } from '../src/domain/paging.js';
import type { GenerationRecord } from '../src/domain/types.js';
import { outboxEntries, webhookMessageId } from '../src/push/webhook-messages.js';
import { canonical, requestHash } from '../src/domain/request-hash.js';

// The rules issue 35 asks to be written once (the fee of each failure, the price cap, batch done, paging, the webhook
// message id), checked as the pure functions every caller now asks.

describe('the fee of each failure (domain/fees.ts)', () => {
  const table: Array<[FailureCause, string, 'failure_fee' | 'free']> = [
    ['timeout', 'timeout', 'failure_fee'],
    ['provider_failed', 'provider_error', 'failure_fee'],
    ['bad_output', 'provider_error', 'failure_fee'],
    ['storage_unavailable', 'storage_unavailable', 'free'],
    ['worker_lost', 'worker_lost', 'failure_fee'],
    ['model_gone', 'model_unavailable', 'free'],
    ['not_queued', 'model_unavailable', 'free'],
    ['cancelled_pending', 'cancelled', 'free'],
    ['cancelled_running', 'cancelled', 'failure_fee'],
  ];
  for (const [cause, code, fee] of table) {
    it(`${cause}: code ${code}, ${fee === 'free' ? 'free' : 'the failure fee'}`, () => {
      expect(failureRule(cause)).toEqual({ code, fee });
      expect(failurePrice(cause, 7, 10)).toBe(fee === 'free' ? 0 : 7);
      expect(failurePrice(cause, 7, 4)).toBe(fee === 'free' ? 0 : 4);
    });
  }

  it("takes a provider's own code for its own failures only", () => {
    expect(failureRule('provider_failed', 'invalid_input')).toEqual({ code: 'invalid_input', fee: 'failure_fee' });
    expect(failureRule('storage_unavailable', 'invalid_input')).toEqual({ code: 'storage_unavailable', fee: 'free' });
    expect(failureRule('timeout', 'invalid_input')).toEqual({ code: 'timeout', fee: 'failure_fee' });
  });
});

describe('the price cap (completionCharge)', () => {
  it("charges the provider's price, its own model's reserve by default, never more than the reserve", () => {
    expect(completionCharge(10, undefined)).toBe(10);
    expect(completionCharge(10, 4)).toBe(4);
    expect(completionCharge(10, 0)).toBe(0);
    expect(completionCharge(10, 25)).toBe(10);
  });

  it("charges a fallback's own price for its settings unless the provider reported one, capped alike", () => {
    expect(completionCharge(10, undefined, 6)).toBe(6);
    expect(completionCharge(10, undefined, 40)).toBe(10);
    expect(completionCharge(10, 3, 6)).toBe(3);
  });
});

describe('batch done (isBatchDone)', () => {
  const counts = (pending: number, processing: number) => ({ pending, processing, completed: 2, failed: 1 });
  it('is done once nothing is pending or processing', () => {
    expect(isBatchDone(counts(0, 0))).toBe(true);
    expect(isBatchDone(counts(1, 0))).toBe(false);
    expect(isBatchDone(counts(0, 1))).toBe(false);
  });
});

describe('paging (readPage)', () => {
  const rec = (i: number): GenerationRecord =>
    ({ id: `${String(i).padStart(2, '0')}${'a'.repeat(20)}`, createdAt: 1000 - i }) as unknown as GenerationRecord;
  const rows = Array.from({ length: 5 }, (_, i) => rec(i));

  it('asks one more than the page and gives the cursor of its last item only when another page follows', async () => {
    const asked: unknown[] = [];
    const first = await readPage({ limit: 2 }, async (q) => (asked.push(q), rows.slice(0, q.limit)), (r) => r.id);
    expect(asked).toEqual([{ limit: 3 }]);
    expect(first.data).toEqual([rows[0]!.id, rows[1]!.id]);
    expect(decodeCursor(first.nextCursor!)).toEqual({ createdAt: rows[1]!.createdAt, id: rows[1]!.id });
    const last = await readPage({ limit: 10, cursor: first.nextCursor! }, async (q) => (asked.push(q), rows.slice(2)), (r) => r.id);
    expect(asked[1]).toEqual({ limit: 11, before: { createdAt: rows[1]!.createdAt, id: rows[1]!.id } });
    expect(last).toEqual({ data: rows.slice(2).map((r) => r.id), nextCursor: null });
  });

  it('defaults to 20, and refuses a cursor no page gave', async () => {
    const asked: Array<{ limit: number }> = [];
    await readPage({}, async (q) => (asked.push(q), []), (r) => r);
    expect(asked[0]!.limit).toBe(21);
    for (const cursor of ['', 'not a cursor!', encodeCursor({ createdAt: 1, id: 'short' }), Buffer.from('[1]').toString('base64url')]) {
      const err = await readPage({ cursor }, async () => [], (r) => r).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(DomainError);
      expect((err as DomainError).details?.[0]?.field).toBe('cursor');
    }
  });
});

describe('the webhook message id (one function for all three producers)', () => {
  // The ids receivers have seen so far: a message written again after an upgrade must keep its id.
  const before = (subject: string, seq: number, url: string) => `msg_${createHash('sha256').update(`${subject}\n${seq}\n${url}`).digest('base64url').slice(0, 24)}`;

  it('is the id the outbox has always given', () => {
    expect(webhookMessageId('gen_1', 3, 'https://a.example/h')).toBe(before('gen_1', 3, 'https://a.example/h'));
  });

  it("keys a generation's event by its seq, and a batch's completion by 0 while storing seq 1", () => {
    const [event] = outboxEntries({ subject: 'g', idSeq: 4, seq: 4, ownerId: 'u', type: 'generation.completed', payload: '{}', at: 5, traceparent: 'tp' }, ['https://r']);
    expect(event).toEqual({ id: before('g', 4, 'https://r'), generationId: 'g', ownerId: 'u', seq: 4, type: 'generation.completed', url: 'https://r', payload: '{}', nextAttemptAt: 5, createdAt: 5, traceparent: 'tp' });
    const [batch] = outboxEntries({ subject: 'batch_x', idSeq: 0, seq: 1, ownerId: 'u', type: 'batch.completed', payload: '{}', at: 5 }, ['https://r']);
    expect(batch).toEqual({ id: before('batch_x', 0, 'https://r'), generationId: 'batch_x', ownerId: 'u', seq: 1, type: 'batch.completed', url: 'https://r', payload: '{}', nextAttemptAt: 5, createdAt: 5 });
  });
});

describe('the request hash of an Idempotency-Key', () => {
  it('does not depend on the order of keys', () => {
    expect(canonical({ b: 1, a: [{ d: null, c: 'x' }] })).toBe('{"a":[{"c":"x","d":null}],"b":1}');
    expect(requestHash({ b: 1, a: 2 })).toBe(requestHash({ a: 2, b: 1 }));
    expect(requestHash({ a: 1 })).not.toBe(requestHash({ a: 2 }));
  });
});
