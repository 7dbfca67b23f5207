// The OTLP/HTTP recipe of docs/observability.md, run as a reader runs it: its `tracing.ts` and `server.ts` blocks are
// written out as they stand, the host is started in a process of its own (`PORT` and
// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` from the environment), a generation is created over HTTP with a client's
// `traceparent` and `tracestate`, the host is stopped with SIGTERM, and a loopback collector (node:http on
// 127.0.0.1, POST /v1/traces) must have received one trace: create (child of the client) -> run -> provider call.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createClient } from '@genservice/client';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const dir = fileURLToPath(new URL('../.generated-otlp/', import.meta.url));

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';

/** The ```ts block of docs/observability.md whose first line is `// <name>`. */
function block(name: string): string {
  const text = readFileSync(join(root, 'docs/observability.md'), 'utf8');
  const found = [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((code) => code.startsWith(`// ${name}\n`));
  expect(found, `one block named ${name}`).toHaveLength(1);
  return found[0]!;
}

/** The OTLP/HTTP JSON encoding of a span (hex ids), as far as this test reads it. */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind: number;
}

interface Collector {
  url: string;
  spans: OtlpSpan[];
  requests: Array<{ path: string; contentType: string | undefined }>;
  server: Server;
}

/** A collector on loopback: takes OTLP/HTTP JSON POSTs to /v1/traces (and answers 415 to anything it cannot read). */
async function collector(): Promise<Collector> {
  const spans: OtlpSpan[] = [];
  const requests: Collector['requests'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push({ path: req.url ?? '', contentType: req.headers['content-type'] });
      if (req.method !== 'POST' || req.url !== '/v1/traces') return void res.writeHead(404).end();
      if (!req.headers['content-type']?.startsWith('application/json')) return void res.writeHead(415).end();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: OtlpSpan[] }> }>;
      };
      for (const rs of body.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, spans, requests, server };
}

/** A port nobody listens on now (taken from the OS, then let go) for the host's `PORT`. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe('docs/observability.md: the OTLP/HTTP recipe', () => {
  it('exports one trace create -> run -> provider call, with the right parents, to a loopback collector', async () => {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'tracing.ts'), block('tracing.ts'));
    writeFileSync(join(dir, 'server.ts'), block('server.ts'));
    // The reader's own provider, as the doc-blocks test supplies it.
    writeFileSync(
      join(dir, 'my-provider.ts'),
      `import type { ModelProvider } from '@genservice/core';
export const myProvider: ModelProvider = {
  models: [{ modelId: 'echo', title: 'Echo', resultType: 'text', estimatedGenerationTime: 0.1, settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }], price: 1 }],
  generate: async (input) => ({ text: 'echo: ' + String(input.settings.prompt) }),
};
`,
    );
    const otlp = await collector();
    const port = await freePort();
    // As the reader starts it (TypeScript through tsx; the workspace packages from source).
    const host = spawn(process.execPath, ['--conditions=@genservice/source', '--import', 'tsx', 'server.ts'], {
      cwd: dir,
      env: { ...process.env, PORT: String(port), OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlp.url, ALICE_KEY: 'alice-otlp-key' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(host);
    let output = '';
    host.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    host.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => host.once('exit', (code) => resolve(code)));
    try {
      // Started when it says so, or gone.
      await new Promise<void>((resolve) => {
        host.stdout!.on('data', () => output.includes('listening') && resolve());
        host.once('exit', () => resolve());
      });
      expect(output).toContain('listening');

      // The client, its create carrying a client's trace context (its POST only: polls are not traced).
      const client = createClient({
        baseUrl: `http://127.0.0.1:${port}/gen`,
        apiKey: 'alice-otlp-key',
        fetch: (url, init) => {
          const headers = new Headers(init?.headers);
          if (init?.method === 'POST') {
            headers.set('traceparent', `00-${TRACE_ID}-${CLIENT_SPAN}-01`);
            headers.set('tracestate', 'vendor=abc');
          }
          return fetch(url, { ...init, headers });
        },
      });
      const done = await client.generations.run({ modelId: 'echo', settings: { prompt: 'hi' } }, { timeoutMs: 20_000 });
      expect(done).toMatchObject({ status: 'completed', result: 'echo: hi' });
      // SIGTERM: the recipe stops the service and shuts the provider down, which exports what is buffered.
      host.kill('SIGTERM');
      expect(await exited, output).toBe(0);
    } finally {
      otlp.server.close();
    }

    expect(otlp.requests.length).toBeGreaterThan(0);
    expect(otlp.requests.every((r) => r.path === '/v1/traces' && r.contentType?.startsWith('application/json'))).toBe(true);
    const trace = otlp.spans.filter((s) => s.traceId === TRACE_ID);
    const named = (name: string): OtlpSpan => {
      const found = trace.filter((s) => s.name === name);
      expect(found, otlp.spans.map((s) => `${s.name} ${s.traceId}`).join('\n')).toHaveLength(1);
      return found[0]!;
    };
    const create = named('genservice.create');
    const run = named('genservice.run');
    const call = named('genservice.provider.generate');
    expect(create.parentSpanId).toBe(CLIENT_SPAN);
    expect(run.parentSpanId).toBe(create.spanId);
    expect(call.parentSpanId).toBe(run.spanId);
    expect(call.kind).toBe(3); // SPAN_KIND_CLIENT in OTLP
    for (const span of [create, run, call]) expect(span.traceState).toBe('vendor=abc');
    // Every span genservice made for this generation is in this one trace.
    expect(otlp.spans.filter((s) => s.name.startsWith('genservice.') && s.traceId !== TRACE_ID)).toEqual([]);
  }, 60_000);
});
