import { createClient, type ClientOptions, type GenServiceClient, type Model } from '../src/index.js';

export interface FakeRequest {
  method: string;
  url: string;
  /** Path without the base URL. */
  path: string;
  headers: Record<string, string>;
  body: unknown;
  signal?: AbortSignal;
  /** Date.now() when fetch was called (fake time under vi.useFakeTimers). */
  at: number;
}

export type Handler = (request: FakeRequest) => Response | Promise<Response>;

export const BASE_URL = 'https://api.test';

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(body === undefined ? null : JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

export function errorBody(code: string, message = `${code} happened`, details?: unknown[]): unknown {
  return { error: { code, message, ...(details ? { details } : {}) } };
}

/** Never answers; rejects like real fetch when the request's signal aborts. */
export function hang(signal: AbortSignal | undefined): Promise<Response> {
  return new Promise((_resolve, reject) => {
    signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

export function model(modelId: string, estimatedGenerationTime: number): Model {
  return {
    modelId,
    title: modelId,
    resultType: 'text',
    estimatedGenerationTime,
    settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
  };
}

/**
 * A fake fetch that records every call. The models list is answered by default (override by handling
 * `/v1/models` yourself), so tests about polling need only script the generation routes.
 */
export function fakeServer(
  handler: Handler,
  options: { models?: Model[]; clientOptions?: Partial<ClientOptions> } = {},
): { client: GenServiceClient; calls: FakeRequest[]; polls(): FakeRequest[] } {
  const calls: FakeRequest[] = [];
  const models = options.models ?? [model('m', 4)];
  const fetch = async (input: string, init: RequestInit): Promise<Response> => {
    const url = String(input);
    // A service without live streams (an older one): the client falls back to polling, which these tests are about.
    // Not recorded, so the polls the tests count are the polls.
    if (/\/v1\/generations\/[^/]+\/events$/.test(url.slice(BASE_URL.length))) return json(404, errorBody('not_found'));
    const request: FakeRequest = {
      method: init.method ?? 'GET',
      url,
      path: url.slice(BASE_URL.length),
      headers: headersOf(init.headers),
      body: typeof init.body === 'string' ? JSON.parse(init.body) : undefined,
      signal: init.signal ?? undefined,
      at: Date.now(),
    };
    calls.push(request);
    if (request.signal?.aborted) throw request.signal.reason;
    const response = await handler(request);
    if (response.status === 599) return json(200, { models });
    return response;
  };
  // One try per request unless a test asks for the retry policy (test/retry.test.ts tests it): these tests count calls.
  const client = createClient({ baseUrl: BASE_URL, apiKey: 'key-1', fetch, retry: false, ...options.clientOptions });
  return {
    client,
    calls,
    // A failed generation's reason is one more read (/details): not a poll.
    polls: () => calls.filter((c) => c.method === 'GET' && c.path.startsWith('/v1/generations/') && !c.path.endsWith('/details')),
  };
}

function headersOf(init: HeadersInit | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  new Headers(init).forEach((value, key) => {
    out[key] = value;
  });
  return out;
}

/** Answer for "use the default models list" from a handler. */
export const MODELS = (): Response => new Response(null, { status: 599 });

/** A handler that answers the models list and hands every generation GET to `statuses` in turn. */
export function scripted(steps: Array<Response | (() => Response) | ((r: FakeRequest) => Promise<Response>)>): Handler {
  let i = 0;
  return (request) => {
    if (request.path === '/v1/models') return MODELS();
    if (request.method === 'POST' && request.path === '/v1/generations') return json(201, { generationId: 'g1' });
    const step = steps[Math.min(i, steps.length - 1)];
    i += 1;
    if (step instanceof Response) return step.clone();
    return step(request);
  };
}

export const pending = (): Response => json(200, { status: 'pending' });
export const processing = (): Response => json(200, { status: 'processing' });
// Zero-argument so they can be passed as steps to `scripted` as they are.
export const completed = (): Response => json(200, { status: 'completed', result: 'done', price: 3 });
/** Called with a price: a Response, which `scripted` clones per use. */
export const failed = (price: number): Response => json(200, { status: 'failed', price });
