// Issue 24, item 4 and `__proto__`: text no store can keep as given (NUL, lone surrogates) and `__proto__` keys get
// the same 400 naming the field on every store (memory, SQLite, PostgreSQL), never a 500 and never a silent drop.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createGenerationService, MemoryApiKeyStore, MemoryLedger, type GenerationService, type GenerationServiceOptions } from '@genservice/core';
import { createPostgresStores } from '@genservice/store-postgres';
import { createSqliteStores } from '@genservice/store-sqlite';
import { createTestDatabase } from '../../packages/store-postgres/test/helpers.js';


const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

type Stores = Pick<GenerationServiceOptions, 'store' | 'ledger' | 'apiKeys' | 'idempotency' | 'webhookStore'>;

const STORES: Record<string, () => Promise<Stores>> = {
  memory: async () => ({ apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'key-u', userId: 'u' }] }), ledger: new MemoryLedger({ balances: { u: 1000 } }) }),
  sqlite: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gs-hostile-'));
    const stores = createSqliteStores({ filename: join(dir, 'db.sqlite') });
    cleanups.push(async () => {
      await stores.close();
      rmSync(dir, { recursive: true, force: true });
    });
    await stores.apiKeys.addKey('key-u', 'u');
    await stores.ledger.credit('u', 1000);
    const { db: _db, close: _close, ...ports } = stores;
    return ports;
  },
  postgres: async () => {
    // A database of its own, dropped afterwards (cleanups run in reverse: the pool closes first).
    const db = await createTestDatabase('genservice_hostile');
    cleanups.push(() => db.drop());
    const stores = await createPostgresStores({ connectionString: db.url, poolSize: 3 });
    cleanups.push(() => stores.close());
    await stores.apiKeys.addKey('key-u', 'u');
    await stores.ledger.credit('u', 1000);
    const { pool: _pool, close: _close, migrate: _migrate, ...ports } = stores;
    return ports;
  },
};

/** What the test sends, and the field the 400 must name (null: the request is fine and stored exactly). */
const CASES: Array<[label: string, body: string, field: string | null]> = [
  ['NUL in a metadata value', '{"modelId":"m","metadata":{"k":"a\\u0000b"}}', 'metadata.k'],
  ['NUL in a metadata key', '{"modelId":"m","metadata":{"k\\u0000":"v"}}', 'metadata.k\u0000'],
  ['a lone low surrogate in a metadata value', '{"modelId":"m","metadata":{"k":"\\udfff"}}', 'metadata.k'],
  ['a lone high surrogate in a metadata value', '{"modelId":"m","metadata":{"k":"x\\ud800y"}}', 'metadata.k'],
  ['a lone surrogate in a metadata key', '{"modelId":"m","metadata":{"\\udfff":"v"}}', 'metadata.\udfff'],
  ['NUL in a webhook URL', '{"modelId":"m","webhook":{"url":"http://127.0.0.1:9/in\\u0000"}}', 'webhook.url'],
  ['a lone surrogate in a webhook URL', '{"modelId":"m","webhook":{"url":"http://127.0.0.1:9/in\\udfff"}}', 'webhook.url'],
  ['__proto__ as a metadata key', '{"modelId":"m","metadata":{"__proto__":"x","k":"v"}}', 'metadata.__proto__'],
  ['__proto__ as a setting', '{"modelId":"m","settings":{"__proto__":{"polluted":true},"prompt":"p"}}', 'settings.__proto__'],
  ['a surrogate pair and other text', '{"modelId":"m","metadata":{"emoji \\ud83d\\ude00":"\\u00e9\\u2603 \\ud83d\\ude00"},"settings":{"prompt":"\\ud83d\\ude00"}}', null],
];

const answersBy: Record<string, string[]> = {};

describe.each(Object.keys(STORES))('hostile text on the %s store (issue 24, item 4)', (kind) => {
  let service: GenerationService;

  it('answers 400 naming the field, the same on every store, and stores what it accepts exactly', async () => {
    const stores = await STORES[kind]!();
    service = createGenerationService({
      providers: [
        {
          models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, price: 1, settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text' }] }],
          generate: async () => ({ text: 'ok' }),
        },
      ],
      ...stores,
      webhooks: { allowHttp: true, allowPrivateUrls: true, deliver: false },
      runner: { enabled: false },
      recovery: { intervalMs: 0, onStart: false },
    });
    cleanups.push(() => service.stop({ timeoutMs: 200 }));
    await service.start();
    const answers: string[] = [];
    for (const [label, body, field] of CASES) {
      const r = await service.handle({
        method: 'POST',
        path: '/v1/generations',
        headers: { authorization: 'Bearer key-u', 'content-type': 'application/json' },
        body,
      });
      const parsed = JSON.parse(String(r.body)) as { generationId?: string; error?: { code: string; details?: Array<{ field: string; message: string }> } };
      answers.push(`${label}: ${r.status} ${parsed.error?.code ?? ''} ${(parsed.error?.details ?? []).map((d) => d.field).join(',')}`);
      if (field === null) {
        expect(r.status, label).toBe(201);
        const details = await service.handle({ method: 'GET', path: `/v1/generations/${parsed.generationId}?include=details`, headers: { authorization: 'Bearer key-u' } });
        expect(JSON.parse(String(details.body)).metadata).toEqual(JSON.parse(body).metadata);
      } else {
        expect(r.status, label).toBe(400);
        const detail = parsed.error!.details!.find((d) => d.field === field);
        expect(detail, label).toBeDefined();
        // The sentence says what is wrong, not only where.
        expect((detail as { message?: string }).message, label).toMatch(/NUL characters or lone surrogates|__proto__/);
      }
    }
    answersBy[kind] = answers;
    // Nothing was charged for the refused ones.
    const balance = await service.handle({ method: 'GET', path: '/v1/balance', headers: { authorization: 'Bearer key-u' } });
    expect(JSON.parse(String(balance.body)).balance).toBe(999);
  });
});

describe('every store', () => {
  it('gives the same answer to each case', () => {
    expect(Object.keys(answersBy).sort()).toEqual(['memory', 'postgres', 'sqlite']);
    expect(answersBy.sqlite).toEqual(answersBy.memory);
    expect(answersBy.postgres).toEqual(answersBy.memory);
  });
});
