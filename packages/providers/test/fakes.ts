// Local fake servers speaking Replicate's predictions API and fal's queue API (their documented wire formats), on
// 127.0.0.1, for tests that need no key and no internet.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { encodePng } from '@genservice/demo-models';

export const PNG = encodePng({ width: 4, height: 4, data: new Uint8Array(64).fill(200) }, { alpha: false });
/** Stand-ins for a video and an audio file (only their bytes and MIME types matter here). */
export const MP4 = new Uint8Array([0, 0, 0, 24, 0x66, 0x74, 0x79, 0x70, 0x69, 0x73, 0x6f, 0x6d, 0, 0, 2, 0, 0x69, 0x73, 0x6f, 0x6d, 0x6d, 0x70, 0x34, 0x31]);
export const MP3 = new Uint8Array([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 0, 0xff, 0xfb, 0x90, 0x64]);
const FILES: Record<string, { bytes: Uint8Array; type: string }> = {
  png: { bytes: PNG, type: 'image/png' },
  mp4: { bytes: MP4, type: 'video/mp4' },
  mp3: { bytes: MP3, type: 'audio/mpeg' },
};

export interface FakeJob {
  id: string;
  input: Record<string, unknown>;
  checks: number;
  cancelled: boolean;
  createdAt: number;
  /** Set by the test to finish a held job. */
  release?: () => void;
}

export interface FakeOptions {
  /** Checks (status reads) before a job finishes; default 2. */
  checksToFinish?: number;
  /** And the time since its create before it finishes; default 0. */
  finishAfterMs?: number;
  /** Jobs stay running until `fake.releaseAll()`. */
  hold?: boolean;
  /** The next N creates answer `createStatus` (default 503). */
  failCreates?: number;
  createStatus?: number;
  /** The next N status reads answer 503. */
  failChecks?: number;
  /** A job whose input prompt is this fails upstream. */
  failPrompt?: string;
  /** Result kind: an image URL (default), a video or audio URL, or text. */
  result?: 'image' | 'video' | 'audio' | 'text';
  /** fal: the origin of the `response_url`s it gives (default: this server's). */
  responseOrigin?: string;
  /** The result URL's host (default: this server). */
  resultBase?: string;
}

export interface Fake {
  url: string;
  jobs: Map<string, FakeJob>;
  /** Creates (submits) per job input prompt. */
  createsByPrompt: Map<string, number>;
  creates: number;
  cancels: number;
  /** Every request's method, path, Host and authorization header. */
  requests: Array<{ method: string; path: string; host?: string; authorization?: string; traceparent?: string }>;
  options: FakeOptions;
  releaseAll(): void;
  close(): Promise<void>;
}

function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>);
      } catch {
        resolve({});
      }
    });
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

async function start(handler: (fake: Fake, req: IncomingMessage, res: ServerResponse, path: string) => Promise<void>, options: FakeOptions): Promise<Fake> {
  let server!: Server;
  const fake: Fake = {
    url: '',
    jobs: new Map(),
    createsByPrompt: new Map(),
    creates: 0,
    cancels: 0,
    requests: [],
    options,
    releaseAll() {
      options.hold = false;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  server = createServer((req, res) => {
    const path = req.url ?? '/';
    const traceparent = typeof req.headers.traceparent === 'string' ? req.headers.traceparent : undefined;
    fake.requests.push({ method: req.method ?? 'GET', path, host: req.headers.host, authorization: req.headers.authorization, ...(traceparent ? { traceparent } : {}) });
    if (req.method === 'GET' && path.startsWith('/files/')) {
      const file = FILES[path.slice(path.lastIndexOf('.') + 1)] ?? FILES.png!;
      res.writeHead(200, { 'content-type': file.type, 'content-length': file.bytes.byteLength }).end(Buffer.from(file.bytes));
      return;
    }
    handler(fake, req, res, path).catch((err: unknown) => send(res, 500, { detail: String(err) }));
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  fake.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return fake;
}

function countCreate(fake: Fake, input: Record<string, unknown>): void {
  fake.creates++;
  const prompt = String(input.prompt ?? '');
  fake.createsByPrompt.set(prompt, (fake.createsByPrompt.get(prompt) ?? 0) + 1);
}

function finished(fake: Fake, job: FakeJob): boolean {
  return !fake.options.hold && job.checks >= (fake.options.checksToFinish ?? 2) && Date.now() - job.createdAt >= (fake.options.finishAfterMs ?? 0);
}

/** Takes one of the `failCreates` / `failChecks` budget: true when this request is to fail. */
function take(fake: Fake, key: 'failCreates' | 'failChecks'): boolean {
  if ((fake.options[key] ?? 0) <= 0) return false;
  fake.options[key]!--;
  return true;
}

function fileUrl(fake: Fake, id: string): string {
  const ext = fake.options.result === 'video' ? 'mp4' : fake.options.result === 'audio' ? 'mp3' : 'png';
  return `${fake.options.resultBase ?? fake.url}/files/${id}.${ext}`;
}

let counter = 0;
const newId = (): string => `job${Date.now().toString(36)}${(++counter).toString(36)}`;

/** Replicate: POST /v1/predictions, POST /v1/models/{owner}/{name}/predictions, GET /v1/predictions/{id}, POST .../cancel. */
export function fakeReplicate(token: string, options: FakeOptions = {}): Promise<Fake> {
  return start(async (fake, req, res, path) => {
    if (req.headers.authorization !== `Bearer ${token}`) return send(res, 401, { title: 'Unauthenticated', detail: 'You did not pass a valid authentication token', status: 401 });
    const create = req.method === 'POST' && (path === '/v1/predictions' || /^\/v1\/models\/[\w.-]+\/[\w.-]+\/predictions$/.test(path));
    if (create) {
      const body = await readJson(req);
      if (take(fake, 'failCreates')) {
        const status = fake.options.createStatus ?? 503;
        return send(res, status, status === 429 ? { title: 'Request was throttled', detail: 'Request was throttled.', status } : { detail: 'Service temporarily unavailable' });
      }
      const input = (body.input ?? {}) as Record<string, unknown>;
      if (typeof input.prompt !== 'string') return send(res, 422, { title: 'Input validation failed', detail: '- input: prompt is required', status: 422 });
      countCreate(fake, input);
      const id = newId();
      fake.jobs.set(id, { id, input, checks: 0, cancelled: false, createdAt: Date.now() });
      return send(res, 201, { id, status: 'starting', input, urls: { get: `${fake.url}/v1/predictions/${id}`, cancel: `${fake.url}/v1/predictions/${id}/cancel` } });
    }
    const get = /^\/v1\/predictions\/([\w-]+)$/.exec(path);
    if (get && req.method === 'GET') {
      const job = fake.jobs.get(get[1]!);
      if (!job) return send(res, 404, { detail: 'Not found.' });
      if (take(fake, 'failChecks')) return send(res, 503, { detail: 'Service temporarily unavailable' });
      job.checks++;
      const base = { id: job.id, input: job.input };
      if (job.cancelled) return send(res, 200, { ...base, status: 'canceled' });
      if (job.input.prompt === fake.options.failPrompt) return send(res, 200, { ...base, status: 'failed', error: `NSFW content detected in ${String(job.input.prompt)}` });
      if (!finished(fake, job)) return send(res, 200, { ...base, status: job.checks === 1 ? 'starting' : 'processing', logs: `step 1\n  42%|####      | 21/50` });
      // Text streams as a list of strings; an image model gives a list of URLs, a video or audio model one URL.
      const output =
        fake.options.result === 'text' ? ['Hello', ', ', String(job.input.prompt)] : fake.options.result === 'video' || fake.options.result === 'audio' ? fileUrl(fake, job.id) : [fileUrl(fake, job.id)];
      return send(res, 200, { ...base, status: 'succeeded', output, logs: '100%' });
    }
    const cancel = /^\/v1\/predictions\/([\w-]+)\/cancel$/.exec(path);
    if (cancel && req.method === 'POST') {
      const job = fake.jobs.get(cancel[1]!);
      if (!job) return send(res, 404, { detail: 'Not found.' });
      job.cancelled = true;
      fake.cancels++;
      return send(res, 200, { id: job.id, status: 'canceled' });
    }
    send(res, 404, { detail: 'Not found.' });
  }, options);
}

/** fal queue: POST /{endpoint}, GET /{app}/requests/{id}/status, GET /{app}/requests/{id}, PUT .../cancel. */
export function fakeFal(key: string, options: FakeOptions = {}): Promise<Fake> {
  return start(async (fake, req, res, path) => {
    if (req.headers.authorization !== `Key ${key}`) return send(res, 401, { detail: 'Invalid API key' });
    const pathname = path.split('?')[0]!;
    const request = /^\/((?:workflows\/|comfy\/)?[\w.-]+\/[\w.-]+)\/requests\/([\w-]+)(\/status|\/cancel)?$/.exec(pathname);
    if (request) {
      const [, app, id, tail] = request;
      const job = fake.jobs.get(id!);
      if (!job) return send(res, 404, { detail: 'Request not found' });
      const urls = `${fake.options.responseOrigin ?? fake.url}/${app}/requests/${id}`;
      if (tail === '/cancel' && req.method === 'PUT') {
        job.cancelled = true;
        fake.cancels++;
        return send(res, 202, { status: 'CANCELLATION_REQUESTED' });
      }
      if (tail === '/status' && req.method === 'GET') {
        if (take(fake, 'failChecks')) return send(res, 503, { detail: 'Service unavailable' });
        job.checks++;
        if (job.cancelled) return send(res, 200, { status: 'COMPLETED', error: 'Request was cancelled', response_url: urls });
        if (!finished(fake, job)) {
          return job.checks === 1
            ? send(res, 202, { status: 'IN_QUEUE', queue_position: 2, response_url: urls })
            : send(res, 202, { status: 'IN_PROGRESS', logs: [{ message: 'loading' }, { message: '60%' }], response_url: urls });
        }
        return send(res, 200, { status: 'COMPLETED', logs: [], response_url: urls });
      }
      if (!tail && req.method === 'GET') {
        if (job.input.prompt === fake.options.failPrompt) return send(res, 422, { detail: [{ loc: ['body', 'prompt'], msg: `prompt flagged: ${String(job.input.prompt)}`, type: 'value_error' }] });
        if (fake.options.result === 'text') return send(res, 200, { output: `Hello, ${String(job.input.prompt)}` });
        if (fake.options.result === 'video') return send(res, 200, { video: { url: fileUrl(fake, id!), content_type: 'video/mp4' } });
        if (fake.options.result === 'audio') return send(res, 200, { audio: { url: fileUrl(fake, id!), content_type: 'audio/mpeg' } });
        return send(res, 200, { images: [{ url: fileUrl(fake, id!), content_type: 'image/png', width: 4, height: 4 }], seed: 1 });
      }
    }
    if (req.method === 'POST' && /^\/[\w.-]+\/[\w.-]+(\/[\w.-]+)*$/.test(pathname)) {
      const input = await readJson(req);
      if (take(fake, 'failCreates')) {
        const status = fake.options.createStatus ?? 503;
        return send(res, status, status === 422 ? { detail: [{ loc: ['body', 'prompt'], msg: 'field required', type: 'value_error.missing' }] } : { detail: 'Service unavailable' });
      }
      countCreate(fake, input);
      const id = newId();
      fake.jobs.set(id, { id, input, checks: 0, cancelled: false, createdAt: Date.now() });
      const segments = pathname.slice(1).split('/');
      const app = segments.slice(0, segments[0] === 'workflows' || segments[0] === 'comfy' ? 3 : 2).join('/');
      const base = `${fake.options.responseOrigin ?? fake.url}/${app}/requests/${id}`;
      return send(res, 200, { request_id: id, status_url: `${base}/status`, response_url: base, cancel_url: `${base}/cancel`, queue_position: 0 });
    }
    send(res, 404, { detail: 'Not found' });
  }, options);
}
