import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createSqliteStores } from '@genservice/store-sqlite';
import { until } from '@genservice/testing';
import { fakeFal, fakeReplicate, type Fake } from './fakes.js';

const TOKEN = 'crash-test-upstream-token';
const KEY = 'key-crash-0123456789abcdef';
const PRICE = 7;
const pkgDir = fileURLToPath(new URL('..', import.meta.url));
const rootTsconfig = fileURLToPath(new URL('../../../tsconfig.json', import.meta.url));

interface Host {
  child: ChildProcess;
  url: string;
}

async function startHost(env: Record<string, string>): Promise<Host> {
  const child = spawn(process.execPath, ['--conditions=@genservice/source', '--import', 'tsx', 'test/fixtures/host.ts'], {
    cwd: pkgDir,
    env: { ...process.env, TSX_TSCONFIG_PATH: rootTsconfig, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`host did not listen:\n${output}`)), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      output += d.toString();
      const m = /"event":"listening","port":(\d+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    child.once('exit', (code) => reject(new Error(`host exited (${code}) before listening:\n${output}`)));
  });
  return { child, url: `http://127.0.0.1:${port}` };
}

function kill(host: Host): Promise<void> {
  return new Promise((resolve) => {
    if (host.child.exitCode !== null || host.child.signalCode !== null) return resolve();
    host.child.once('exit', () => resolve());
    host.child.kill('SIGKILL');
  });
}

describe.each(['replicate', 'fal'] as const)('remote jobs survive a SIGKILL of the host (%s, SQLite)', (provider) => {
  const dir = mkdtempSync(join(tmpdir(), `genservice-providers-${provider}-`));
  const hosts: Host[] = [];
  let fake: Fake | undefined;
  afterAll(async () => {
    for (const h of hosts) await kill(h);
    await fake?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('20 waiting jobs: after SIGKILL and restart every one completes, each created upstream once and charged once', { timeout: 120_000 }, async () => {
    fake = provider === 'replicate' ? await fakeReplicate(TOKEN, { hold: true, result: 'text' }) : await fakeFal(TOKEN, { hold: true, result: 'text' });
    const seed = createSqliteStores({ filename: join(dir, 'genservice.db') });
    await seed.apiKeys.addKey(KEY, 'u');
    await seed.ledger.credit('u', 1000);
    await seed.close();

    const env = { DATA_DIR: dir, PROVIDER: provider, UPSTREAM_KEY: TOKEN, UPSTREAM_URL: fake.url };
    const first = await startHost(env);
    hosts.push(first);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await fetch(`${first.url}/v1/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ modelId: 'flux', settings: { prompt: `job ${i}` } }),
      });
      expect(r.status).toBe(201);
      ids.push(((await r.json()) as { generationId: string }).generationId);
    }
    // Every job is waiting upstream and has been checked at least once (its handle was stored before that check).
    await until(() => fake!.creates === 20 && [...fake!.jobs.values()].every((j) => j.checks > 0), { what: '20 started and checked jobs', timeoutMs: 30_000 });
    await kill(first);

    fake.releaseAll();
    const second = await startHost(env);
    hosts.push(second);
    const read = async (id: string) =>
      (await (await fetch(`${second.url}/v1/generations/${id}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { status: string; result?: string; price?: number };
    await until(async () => (await Promise.all(ids.map(read))).every((g) => g.status === 'completed'), { what: 'every generation completed', timeoutMs: 60_000 });
    const all = await Promise.all(ids.map(read));
    for (let i = 0; i < 20; i++) expect(all[i]).toEqual({ status: 'completed', result: `Hello, job ${i}`, price: PRICE });

    // Exactly one upstream create per generation, nothing created after the restart.
    expect(fake.creates).toBe(20);
    for (let i = 0; i < 20; i++) expect(fake.createsByPrompt.get(`job ${i}`), `job ${i}`).toBe(1);
    await kill(second);

    // Charged once each.
    const check = createSqliteStores({ filename: join(dir, 'genservice.db') });
    try {
      const account = await check.ledger.account('u');
      expect(account.balance).toBe(1000 - 20 * PRICE);
      expect(account.settled).toBe(20 * PRICE);
      expect(account.reserved).toBe(0);
    } finally {
      await check.close();
    }
  });
});
