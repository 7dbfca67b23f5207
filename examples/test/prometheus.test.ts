import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '@genservice/testing';
import { freePort, startHost, tempData, type RunningHost, type TempData } from './helpers.js';

const KEY = 'prom-user-key-0123456789abcdef';
const PROMETHEUS = '/usr/bin/prometheus';

/** One PromQL instant query through Prometheus' HTTP API: the samples' labels and values. */
async function query(base: string, promql: string): Promise<Array<{ metric: Record<string, string>; value: number }>> {
  const res = await fetch(`${base}/api/v1/query?query=${encodeURIComponent(promql)}`);
  if (res.status !== 200) return [];
  const body = (await res.json()) as { data?: { result?: Array<{ metric: Record<string, string>; value: [number, string] }> } };
  return (body.data?.result ?? []).map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
}

// A real Prometheus server (Debian's package; .ci/run installs it) scrapes an example host started with METRICS=1.
describe('an example host with METRICS=1, scraped by Prometheus', () => {
  let host: RunningHost;
  let data: TempData;
  let prometheus: ChildProcess | undefined;
  let promDir: string;
  let promUrl: string;
  let promOut = '';
  const auth = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };

  beforeAll(async () => {
    data = tempData([{ id: 'prom', apiKey: KEY, balance: 10_000 }]);
    host = await startHost('express', { USERS_FILE: data.usersFile, DATA_DIR: data.dir, DEMO_SPEED: '0.02', METRICS: '1' });
    promDir = mkdtempSync(join(tmpdir(), 'genservice-prometheus-'));
    const target = new URL(host.url).host;
    writeFileSync(
      join(promDir, 'prometheus.yml'),
      ['global:', '  scrape_interval: 1s', '  evaluation_interval: 1s', 'scrape_configs:', '  - job_name: genservice', '    metrics_path: /metrics', '    static_configs:', `      - targets: ['${target}']`, ''].join('\n'),
    );
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      PROMETHEUS,
      [`--config.file=${join(promDir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(promDir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stdout!.on('data', (d: Buffer) => (promOut += d.toString()));
    prometheus.stderr!.on('data', (d: Buffer) => (promOut += d.toString()));
  }, 90_000);

  afterAll(async () => {
    if (prometheus && prometheus.exitCode === null) {
      const exited = new Promise((resolve) => prometheus!.once('exit', resolve));
      prometheus.kill('SIGTERM');
      await exited;
    }
    if (host) expect(await host.stop()).toBe(0);
    data?.cleanup();
    if (promDir) rmSync(promDir, { recursive: true, force: true });
  });

  it('answers PromQL with the counts of completed and failed generations', async () => {
    // Metrics are outside the API mount, and not there without METRICS=1 (the other example tests run without it).
    const direct = await fetch(`${host.url}/metrics`);
    expect(direct.status).toBe(200);
    expect(direct.headers.get('content-type')).toMatch(/^text\/plain/);
    const models = (await (await fetch(`${host.api}/v1/models`, { headers: auth })).json()) as { models: Array<{ modelId: string; resultType: string; settings: Array<{ name: string; required?: boolean }> }> };
    const text = models.models.find((m) => m.resultType === 'text' && m.modelId !== 'demo-always-fails' && !m.settings.some((s) => s.required && s.name !== 'prompt'))!;
    const ids: string[] = [];
    const create = async (modelId: string, settings: Record<string, unknown>): Promise<void> => {
      const r = await fetch(`${host.api}/v1/generations`, { method: 'POST', headers: auth, body: JSON.stringify({ modelId, settings }) });
      expect(r.status, await r.clone().text()).toBe(201);
      ids.push(((await r.json()) as { generationId: string }).generationId);
    };
    for (let i = 0; i < 3; i++) await create(text.modelId, { prompt: `hello ${i}` });
    for (let i = 0; i < 2; i++) await create('demo-always-fails', { prompt: 'fail, please' });
    for (const id of ids) {
      await until(
        async () => ((await (await fetch(`${host.api}/v1/generations/${id}`, { headers: auth })).json()) as { status: string }).status,
        { accept: (s) => s === 'completed' || s === 'failed', timeoutMs: 30_000, intervalMs: 50 },
      );
    }

    // Bounded wait: Prometheus starts, scrapes every second, and answers once the samples are in.
    const finished = await until(
      () => query(promUrl, 'sum by (model, status) (genservice_generations_finished_total)').catch(() => []),
      { accept: (rows) => rows.reduce((n, r) => n + r.value, 0) >= 5, timeoutMs: 60_000, intervalMs: 250 },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\nprometheus output:\n${promOut}`);
    });
    const count = (model: string, status: string): number => finished.find((r) => r.metric.model === model && r.metric.status === status)?.value ?? 0;
    expect(count(text.modelId, 'completed')).toBe(3);
    expect(count('demo-always-fails', 'failed')).toBe(2);
    const created = await query(promUrl, 'sum(genservice_generations_created_total)');
    expect(created[0]?.value).toBe(5);
    const posts = await query(promUrl, 'genservice_http_requests_total{route="/v1/generations",status="201"}');
    expect(posts[0]?.value).toBe(5);
    // Route labels are templates: no generation id ever becomes a label.
    const routes = await query(promUrl, 'count by (route) (genservice_http_requests_total)');
    for (const r of routes) for (const id of ids) expect(r.metric.route).not.toContain(id);
    expect(routes.map((r) => r.metric.route)).toContain('/v1/generations/{id}');
  });
});
