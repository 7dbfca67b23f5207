import { randomBytes } from 'node:crypto';
import {
  MemoryApiKeyStore,
  MemoryLedger,
  type GenerationService,
  type GenerationView,
  type LimitsOptions,
  type ModelDefinition,
  type WebhookOptions,
} from '@genservice/core';
import {
  createGate,
  createScriptedProvider,
  delayScript,
  failingScript,
  fakeModel,
  fileScript,
  flakyScript,
  textScript,
  type Gate,
  type ScriptedProvider,
} from '../fakes.js';
import { createTestService } from '../service.js';
import { until } from '../until.js';
import { call, type CallOptions, type Reply } from './http.js';
import type { MountFn, MountOptions } from './types.js';

/** Bytes of every value 0..255 and then some: a file result that any text re-encoding would corrupt. */
export const IMAGE_BYTES: Uint8Array = Uint8Array.from({ length: 3000 }, (_, i) => (i * 7 + (i >> 8)) % 256);
/** The preview the `streamed` model sends before its result. */
export const PREVIEW_BYTES: Uint8Array = Uint8Array.from({ length: 64 }, (_, i) => (i * 13) % 256);
export const VIDEO_BYTES: Uint8Array = Uint8Array.from({ length: 1500 }, (_, i) => 255 - (i % 256));

/** The one browser origin the conformance service allows (CORS). */
export const CORS_ORIGIN = 'https://app.example.test';

/** The models every conformance service offers; each test picks the behaviour it needs by id. */
export function conformanceModels(): ModelDefinition[] {
  return [
    fakeModel({
      modelId: 'echo',
      title: 'Echo',
      price: 10,
      estimatedGenerationTime: 2,
      settings: [{ name: 'prompt', title: 'Prompt', fieldType: 'text', required: true }],
    }),
    fakeModel({ modelId: 'noop', title: 'No-op', price: 1 }),
    fakeModel({ modelId: 'discount', title: 'Charges less than it reserves', price: 10 }),
    fakeModel({ modelId: 'image', title: 'Image', resultType: 'image', price: 5, estimatedGenerationTime: 3 }),
    fakeModel({ modelId: 'video-put', title: 'Video through ctx.files.put', resultType: 'video', price: 5 }),
    fakeModel({ modelId: 'fail', title: 'Always fails', price: 7, failureFee: 2 }),
    fakeModel({ modelId: 'crash', title: 'Throws a plain Error', price: 3 }),
    fakeModel({ modelId: 'flaky', title: 'Two transient failures, then success', price: 3, maxAttempts: 3 }),
    fakeModel({ modelId: 'flaky-slow', title: 'Slow, one transient failure', price: 1, maxAttempts: 3 }),
    fakeModel({ modelId: 'slow', title: 'Takes 5-40 ms', price: 1 }),
    fakeModel({ modelId: 'held', title: 'Waits for the test', price: 4, failureFee: 1, concurrency: 1 }),
    fakeModel({ modelId: 'streamed', title: 'Streams text and a preview, waits for the test, streams more', resultType: 'image', price: 2 }),
    fakeModel({
      modelId: 'settings',
      title: 'Has one setting of each kind',
      price: 1,
      settings: [
        { name: 'prompt', title: 'Prompt', fieldType: 'text', required: true },
        { name: 'style', title: 'Style', fieldType: 'select', options: ['vivid', 'natural'] },
        { name: 'refs', title: 'Reference images', fieldType: 'image' },
        { name: 'notes', title: 'Notes', fieldType: 'text' },
      ],
    }),
  ];
}

export interface User {
  userId: string;
  key: string;
  /** `{ authorization: 'Bearer <key>' }` */
  auth: Record<string, string>;
}

export interface Fixture {
  service: GenerationService;
  provider: ScriptedProvider;
  /** Script of the `held` model. Closed unless a test opens it; a test that opens it closes it again. */
  gate: Gate;
  /**
   * Where the `streamed` model waits, after streaming `Hello` and a preview (PREVIEW_BYTES); released, it streams
   * `, world` and completes with IMAGE_BYTES.
   */
  streamGate: Gate;
  /** The secret file URLs are signed with. */
  secret: string;
  /** `{ authorization: 'Bearer <admin key>' }`: the admin API is on (its actor is `conformance`). */
  adminAuth: Record<string, string>;
  keys: MemoryApiKeyStore;
  ledger: MemoryLedger;
  models: ModelDefinition[];
  baseUrl: string;
  /** Scheme, host and port of the server, without the prefix. */
  origin: string;
  mode: MountOptions;
  /** A fresh user with a key and this many tokens. */
  user(balance?: number): Promise<User>;
  /** A request to `baseUrl + path`. */
  call(path: string, options?: CallOptions): Promise<Reply>;
  create(user: User, body: unknown): Promise<Reply>;
  get(user: User, id: string): Promise<Reply>;
  balance(user: User): Promise<number>;
  /** Polls until the generation is completed or failed. */
  terminal(user: User, id: string, timeoutMs?: number): Promise<GenerationView>;
  close(): Promise<void>;
}

export interface FixtureOptions {
  limits?: LimitsOptions;
  /** Serve the playground page (needs @genservice/playground installed). */
  playground?: boolean;
  /** Serve the console (needs @genservice/playground installed) and the admin routes, behind `ADMIN_KEY`. */
  console?: boolean;
  /** Webhook options (a suite area delivering to a receiver on loopback allows http and private addresses). */
  webhooks?: WebhookOptions;
}

/** The admin key of a fixture made with `console: true`. */
export const ADMIN_KEY = 'conformance-admin-key-0123456789abcdef';

export async function createFixture(mount: MountFn, mode: MountOptions, options: FixtureOptions = {}): Promise<Fixture> {
  const gate = createGate();
  const streamGate = createGate((_input, ctx) => {
    ctx.output.append(', world');
    return { bytes: IMAGE_BYTES, mimeType: 'image/png' };
  });
  const models = conformanceModels();
  const provider = createScriptedProvider({
    models,
    scripts: {
      echo: textScript((input) => `echo: ${String(input.settings.prompt)}`),
      noop: textScript('ok'),
      discount: () => ({ text: 'cheap', price: 6 }),
      image: fileScript(IMAGE_BYTES, 'image/png'),
      'video-put': fileScript(VIDEO_BYTES, 'video/mp4', 'put'),
      fail: failingScript('the fake model failed'),
      crash: failingScript('a provider bug', { plainError: true }),
      flaky: flakyScript(2, textScript('recovered')),
      'flaky-slow': delayScript([5, 25], flakyScript(1, delayScript([5, 25], textScript('late')))),
      slow: delayScript([5, 40], textScript('slow ok')),
      held: gate.script,
      streamed: (input, ctx) => {
        ctx.output.append('Hello');
        ctx.output.preview(PREVIEW_BYTES, 'image/png');
        return streamGate.script(input, ctx);
      },
      settings: textScript((input) => JSON.stringify(input.settings)),
    },
  });
  const keys = new MemoryApiKeyStore();
  const ledger = new MemoryLedger();
  const secret = randomBytes(32).toString('hex');
  const adminKey = `admin_${randomBytes(24).toString('base64url')}`;
  const { service, stop } = await createTestService({
    providers: [provider],
    apiKeys: keys,
    ledger,
    fileUrlSecret: secret,
    // The suite does not know the port before mounting: file URLs come from the request's host, through the
    // adapter's baseUrl.
    trustRequestHost: true,
    // The suite runs hundreds of generations per user at once; the in-flight cap has tests of its own.
    limits: { inFlightPerUser: 100_000, ...options.limits },
    runner: { concurrency: 16 },
    cors: { origins: [CORS_ORIGIN] },
    admin: { apiKeys: [{ key: adminKey, name: 'conformance' }] },
    // A create's priority: low at half price, high at double (the priority tests of create.ts).
    priority: { multipliers: { low: 0.5, high: 2 } },
    ...(options.playground ? { playground: true } : {}),
    ...(options.console ? { console: true, admin: { apiKeys: [{ key: ADMIN_KEY, name: 'conformance' }] } } : {}),
    ...(options.webhooks ? { webhooks: options.webhooks } : {}),
  });
  const server = await mount(service, mode);
  const baseUrl = server.baseUrl.replace(/\/+$/, '');
  const origin = new URL(baseUrl).origin;

  const fx: Fixture = {
    service,
    provider,
    gate,
    streamGate,
    secret,
    adminAuth: { authorization: `Bearer ${adminKey}` },
    keys,
    ledger,
    models,
    baseUrl,
    origin,
    mode,
    async user(balance = 1000) {
      const userId = `user-${randomBytes(6).toString('hex')}`;
      const key = `gs_test_${randomBytes(18).toString('base64url')}`;
      await keys.addKey(key, userId);
      if (balance > 0) await ledger.credit(userId, balance);
      return { userId, key, auth: { authorization: `Bearer ${key}` } };
    },
    call: (path, callOptions) => call(`${baseUrl}${path}`, callOptions),
    create: (user, body) => call(`${baseUrl}/v1/generations`, { method: 'POST', headers: user.auth, json: body }),
    get: (user, id) => call(`${baseUrl}/v1/generations/${encodeURIComponent(id)}`, { headers: user.auth }),
    async balance(user) {
      const r = await call(`${baseUrl}/v1/balance`, { headers: user.auth });
      if (r.status !== 200) throw new Error(`GET /v1/balance answered ${r.status}: ${r.text}`);
      return r.body.balance as number;
    },
    async terminal(user, id, timeoutMs = 10_000) {
      const read = async (): Promise<GenerationView> => {
        const r = await fx.get(user, id);
        if (r.status !== 200) throw new Error(`GET /v1/generations/${id} answered ${r.status}: ${r.text}`);
        return r.body as GenerationView;
      };
      return until(read, { accept: (view) => view.status === 'completed' || view.status === 'failed', timeoutMs, what: `generation ${id} to finish` });
    },
    async close() {
      gate.open();
      streamGate.open();
      await server.close();
      await stop();
    },
  };
  return fx;
}
