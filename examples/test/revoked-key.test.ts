/**
 * Issue 37 item 2: a key listed in USERS_FILE and revoked through the admin API stays revoked when the host restarts
 * with the same data and users file (the host seeds the file's keys at every start), on SQLite and on Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../../packages/store-postgres/test/helpers.js';
import { startHost, tempData, type RunningHost, type TempData } from './helpers.js';

const ALICE = 'alice-key-0123456789abcdef';
const BOB = 'bob-key-0123456789abcdef';
const ADMIN_KEY = 'admin-key-0123456789abcdef0123456789';

describe.each([
  ['sqlite', 'express'],
  ['postgres', 'koa'],
] as const)('a revoked USERS_FILE key on %s (%s-host)', (store, kind) => {
  let data: TempData;
  let db: TestDatabase | undefined;
  let env: Record<string, string>;
  let host: RunningHost | undefined;

  beforeAll(async () => {
    data = tempData([
      { id: 'alice', apiKey: ALICE, balance: 100 },
      { id: 'bob', apiKey: BOB, balance: 500 },
    ]);
    if (store === 'postgres') db = await createTestDatabase('genservice_revoked');
    env = { USERS_FILE: data.usersFile, DATA_DIR: data.dir, ADMIN_API_KEY: ADMIN_KEY, ...(db ? { DATABASE_URL: db.url } : {}) };
  }, 30_000);

  afterAll(async () => {
    if (host) await host.kill();
    await db?.drop();
    data?.cleanup();
  });

  const call = (path: string, key: string, method = 'GET') => fetch(`${host!.api}${path}`, { method, headers: { authorization: `Bearer ${key}` } });

  it('stays revoked after a restart with the same data and users file', async () => {
    host = await startHost(kind, env);
    expect((await call('/v1/balance', ALICE)).status).toBe(200);
    const listed = (await (await call('/v1/admin/users/alice/keys', ADMIN_KEY)).json()) as { data: Array<{ keyId: string }> };
    expect(listed.data).toHaveLength(1);
    expect((await call(`/v1/admin/keys/${listed.data[0]!.keyId}`, ADMIN_KEY, 'DELETE')).status).toBe(204);
    expect((await call('/v1/balance', ALICE)).status).toBe(401);
    expect(await host.stop()).toBe(0);

    // The next deploy: same data, same users file, which still lists alice's key.
    host = await startHost(kind, env);
    expect((await call('/v1/balance', ALICE)).status).toBe(401);
    expect(await (await call('/v1/admin/users/alice/keys', ADMIN_KEY)).json()).toEqual({ data: [] });
    // The rest of the file is seeded as before, and no starting balance is credited twice.
    const bob = await call('/v1/balance', BOB);
    expect(bob.status).toBe(200);
    expect(await bob.json()).toMatchObject({ balance: 500 });
    expect(await host.stop()).toBe(0);
    host = undefined;
  }, 120_000);
});
