import { createServer, type Server } from 'node:http';
import { createFal } from '@ai-sdk/fal';
import { createOpenAI } from '@ai-sdk/openai';
import { APICallError, InvalidArgumentError, LoadAPIKeyError } from '@ai-sdk/provider';
import { createReplicate } from '@ai-sdk/replicate';
import { OutboundError, ProviderError } from '@genservice/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactSecrets, toProviderError } from '../src/errors.js';
import { createAiSdkProvider, createGuardedFetch, sniffMimeType, type AiSdkModel } from '../src/index.js';
import { MP3, MP4, PNG, WAV } from './fake-upstream.js';

const ascii = (text: string, pad = 16): Uint8Array => Buffer.concat([Buffer.from(text, 'latin1'), Buffer.alloc(pad)]);

describe('sniffMimeType', () => {
  it('knows the common result formats by their magic bytes', () => {
    const cases: Array<[Uint8Array, string | undefined]> = [
      [PNG, 'image/png'],
      [Uint8Array.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]), 'image/jpeg'],
      [ascii('RIFF\0\0\0\0WEBPVP8 '), 'image/webp'],
      [ascii('GIF89a'), 'image/gif'],
      [ascii('GIF87a'), 'image/gif'],
      [ascii('\0\0\0\x1cftypavif'), 'image/avif'],
      [ascii('\0\0\0\x18ftypheic'), 'image/heic'],
      [MP3, 'audio/mpeg'],
      [Uint8Array.from([0xff, 0xfb, 0x90, 0x64, 0, 0]), 'audio/mpeg'],
      [Uint8Array.from([0xff, 0xf1, 0x50, 0x80, 0, 0]), 'audio/aac'],
      [WAV, 'audio/wav'],
      [ascii('OggS\0\x02'), 'audio/ogg'],
      [ascii('fLaC'), 'audio/flac'],
      [ascii('FORM\0\0\0\0AIFF'), 'audio/aiff'],
      [ascii('\0\0\0\x20ftypM4A '), 'audio/mp4'],
      [MP4, 'video/mp4'],
      [ascii('\0\0\0\x14ftypqt  '), 'video/quicktime'],
      [Buffer.concat([Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01, 0x42, 0x82, 0x84]), Buffer.from('webm')]), 'video/webm'],
      [Buffer.concat([Buffer.from([0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01, 0x42, 0x82, 0x88]), Buffer.from('matroska')]), 'video/x-matroska'],
      [ascii('glTF\x02\0\0\0'), 'model/gltf-binary'],
      [Buffer.from('hello world'), undefined],
      [new Uint8Array(0), undefined],
      [Uint8Array.from([0x89]), undefined],
    ];
    for (const [bytes, type] of cases) expect(sniffMimeType(bytes), Buffer.from(bytes.subarray(0, 12)).toString('hex')).toBe(type);
  });
});

describe('toProviderError (with the real APICallError of @ai-sdk/provider)', () => {
  const apiError = (statusCode: number | undefined, message = 'boom', isRetryable?: boolean): APICallError =>
    new APICallError({ message, url: 'https://api.example.com/v1/x?key=secret', requestBodyValues: {}, statusCode, isRetryable });

  it('is retryable exactly when the AI SDK says so: 408, 409, 429, 5xx and no answer', () => {
    for (const status of [408, 409, 429, 500, 502, 503]) expect(toProviderError(apiError(status), 'm').retryable, String(status)).toBe(true);
    for (const status of [400, 401, 403, 404, 413, 422]) expect(toProviderError(apiError(status), 'm').retryable, String(status)).toBe(false);
    const unreachable = toProviderError(apiError(undefined, 'Cannot connect to API: ECONNREFUSED', true), 'm');
    expect(unreachable).toMatchObject({ retryable: true, code: 'provider_error', publicMessage: 'The model provider could not be reached.' });
  });

  it('names the status publicly, the reason only for a refused request, never a key or a URL', () => {
    expect(toProviderError(apiError(429), 'm').publicMessage).toBe('The model provider is rate limiting this service (HTTP 429).');
    expect(toProviderError(apiError(503), 'm').publicMessage).toBe('The model provider failed (HTTP 503).');
    expect(toProviderError(apiError(401, 'Incorrect API key provided: sk-abc***xyz'), 'm').publicMessage).toBe(
      'The model provider refused the credentials of this service (HTTP 401).',
    );
    const refused = toProviderError(apiError(422, 'prompt too long for Bearer abc.def token=zzz at https://x.example/y?sig=1'), 'm');
    expect(refused.publicMessage).toBe('The model provider refused the request (HTTP 422): prompt too long for Bearer [redacted] token=[redacted] at [url]');
    // The log message keeps the detail, without the URL's query.
    expect(refused.message).toContain('(HTTP 422 from https://api.example.com/v1/x)');
    expect(refused.cause).toBeInstanceOf(APICallError);
  });

  it('maps the other errors: guard refusals, bad arguments, a missing key, anything else', () => {
    const blocked = toProviderError(new OutboundError('blocked_address', 'refusing to fetch http://10.0.0.1/x'), 'm');
    expect(blocked).toMatchObject({ retryable: false, publicMessage: 'A request of the model provider was refused or failed (blocked_address).' });
    expect(toProviderError(new OutboundError('timeout', 'slow', { retryable: true }), 'm').retryable).toBe(true);
    const invalid = toProviderError(new InvalidArgumentError({ argument: 'size', message: 'size must be 1024x1024' }), 'm');
    expect(invalid).toMatchObject({ code: 'invalid_input', retryable: false, publicMessage: 'The model cannot use these settings: size must be 1024x1024' });
    const noKey = toProviderError(new LoadAPIKeyError({ message: 'OpenAI API key is missing.' }), 'm');
    expect(noKey).toMatchObject({ retryable: false, publicMessage: 'The model is not configured on this service.' });
    const other = toProviderError(new Error('unexpected'), 'm');
    expect(other).toMatchObject({ retryable: false, code: 'provider_error', message: 'm: unexpected' });
    expect(other.publicMessage).toBeUndefined();
    const own = new ProviderError('as is', { retryable: true });
    expect(toProviderError(own, 'm')).toBe(own);
  });

  it('redactSecrets removes keys, tokens and URLs and cuts long text', () => {
    expect(redactSecrets('bad key sk-proj-AbC123_xyz and r8_ABCDEF123456 and fal-1234abcd')).toBe('bad key [redacted] and [redacted] and [redacted]');
    expect(redactSecrets('Authorization: Basic dXNlcjpwYXNz; api_key=abc123')).toBe('Authorization: Basic [redacted]; api_key=[redacted]');
    expect(redactSecrets(`id ${'a1B2'.repeat(10)} end`)).toBe('id [redacted] end');
    expect(redactSecrets('x'.repeat(20).split('').join(' ').repeat(40), 50)).toHaveLength(50);
    expect(redactSecrets('The prompt was rejected.')).toBe('The prompt was rejected.');
  });
});

describe('model kinds and configuration', () => {
  const openai = createOpenAI({ apiKey: 'k' });
  const fal = createFal({ apiKey: 'k' });
  const replicate = createReplicate({ apiToken: 'k' });
  const resultTypes = (models: AiSdkModel[]): Record<string, string> =>
    Object.fromEntries(createAiSdkProvider({ models }).models.map((m) => [m.modelId, m.resultType]));

  it('recognises each kind of the real provider packages from its shape (or class name)', () => {
    expect(
      resultTypes([
        { modelId: 'img', title: 'x', price: 1, model: openai.image('gpt-image-1') },
        { modelId: 'tts', title: 'x', price: 1, model: openai.speech('tts-1') },
        { modelId: 'stt', title: 'x', price: 1, model: openai.transcription('whisper-1') },
        { modelId: 'chat', title: 'x', price: 1, model: openai.chat('gpt-4o-mini') },
        { modelId: 'responses', title: 'x', price: 1, model: openai.responses('gpt-4o-mini') },
        { modelId: 'fal-img', title: 'x', price: 1, model: fal.image('fal-ai/flux/schnell') },
        { modelId: 'fal-video', title: 'x', price: 1, model: fal.video('luma-dream-machine') },
        { modelId: 'fal-tts', title: 'x', price: 1, model: fal.speech('fal-ai/minimax/speech-02-hd') },
        { modelId: 'fal-stt', title: 'x', price: 1, model: fal.transcription('whisper') },
        { modelId: 'replicate-img', title: 'x', price: 1, model: replicate.image('black-forest-labs/flux-schnell') },
      ]),
    ).toEqual({
      img: 'image',
      tts: 'audio',
      stt: 'text',
      chat: 'text',
      responses: 'text',
      'fal-img': 'image',
      'fal-video': 'video',
      'fal-tts': 'audio',
      'fal-stt': 'text',
      'replicate-img': 'image',
    });
  });

  it('takes an explicit kind for a model whose shape does not tell', () => {
    const bare = { specificationVersion: 'v3', provider: 'acme', modelId: 'voice', doGenerate: async () => undefined } as never;
    expect(() => createAiSdkProvider({ models: [{ modelId: 'which', title: 'x', price: 1, model: bare }] })).toThrow(/say kind: 'speech' or 'transcription'/);
    expect(resultTypes([{ modelId: 'which', title: 'x', price: 1, model: bare, kind: 'speech' }])).toEqual({ which: 'audio' });
    expect(() => createAiSdkProvider({ models: [{ modelId: 'k', title: 'x', price: 1, model: bare, kind: 'music' as never }] })).toThrow(/kind "music"/);
  });

  it('refuses wrong options at startup, naming the model', () => {
    const img = openai.image('gpt-image-1');
    expect(() => createAiSdkProvider({ models: [] })).toThrow(/non-empty/);
    expect(() => createAiSdkProvider({ models: [{ modelId: 'x', title: 'x', price: 1, model: {} as never }] })).toThrow(/x.model is not an AI SDK model/);
    expect(() => createAiSdkProvider({ models: [{ modelId: 'e', title: 'x', price: 1, model: openai.embedding('text-embedding-3-small') as never }] })).toThrow(
      /e.model is an embedding model/,
    );
    const v2 = { specificationVersion: 'v2', doGenerate: () => undefined };
    expect(() => createAiSdkProvider({ models: [{ modelId: 'old', title: 'x', price: 1, model: v2 as never }] })).toThrow(/specification v2/);
    const twice = { modelId: 'a', title: 'x', price: 1, model: img };
    expect(() => createAiSdkProvider({ models: [twice, twice] })).toThrow(/modelId a is listed twice/);
    expect(() => createAiSdkProvider({ models: [{ ...twice, settings: { quality: false } }] })).toThrow(/a.settings: quality is not a setting of this image model/);
    expect(() => createAiSdkProvider({ models: [{ ...twice, settings: { seed: { name: 'prompt' } } }] })).toThrow(/the setting prompt is offered twice/);
    expect(() => createAiSdkProvider({ models: [{ ...twice, settings: () => 'nope' as never }] })).toThrow(/must return an array/);
  });

  it('a settings function narrows the defaults; the map form drops and changes them', () => {
    const img = openai.image('gpt-image-1');
    const [narrowed, mapped] = createAiSdkProvider({
      models: [
        { modelId: 'n', title: 'x', price: 1, model: img, sizes: ['1024x1024'], settings: (d) => d.filter((s) => s.name !== 'seed') },
        { modelId: 'm', title: 'x', price: 1, model: img, aspectRatios: ['1:1'], settings: { prompt: { title: 'Describe it' }, seed: false } },
      ],
    }).models;
    expect(narrowed!.settings.map((s) => s.name)).toEqual(['prompt', 'size']);
    expect(mapped!.settings).toEqual([
      { name: 'prompt', title: 'Describe it', fieldType: 'text', required: true },
      { name: 'aspect_ratio', title: 'Aspect ratio', fieldType: 'select', options: ['1:1'] },
    ]);
  });
});

describe('createGuardedFetch', () => {
  let server: Server;
  let base = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/big') return void res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.alloc(5000));
        if (req.url === '/redirect') return void res.writeHead(302, { location: 'http://10.0.0.1/secret' }).end();
        res.writeHead(201, { 'content-type': 'application/json', 'x-echo': String(req.headers['x-test']) });
        res.end(JSON.stringify({ method: req.method, contentType: req.headers['content-type'], body: Buffer.concat(chunks).toString() }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('refuses a private address by default, with OutboundError', async () => {
    await expect(createGuardedFetch()(`${base}/x`)).rejects.toMatchObject({ name: 'OutboundError', code: 'blocked_address' });
  });

  it('sends method, headers and body (form data included) and answers a Response', async () => {
    const guarded = createGuardedFetch({ allowPrivateNetworks: true });
    const res = await guarded(`${base}/echo`, { method: 'POST', headers: { 'x-test': 'yes', 'content-type': 'application/json' }, body: '{"a":1}' });
    expect(res.status).toBe(201);
    expect(res.headers.get('x-echo')).toBe('yes');
    expect(await res.json()).toEqual({ method: 'POST', contentType: 'application/json', body: '{"a":1}' });
    const form = new FormData();
    form.append('file', new Blob([Buffer.from('abc')], { type: 'audio/wav' }), 'a.wav');
    const multipart = (await (await guarded(new Request(`${base}/echo`, { method: 'POST', body: form }))).json()) as { contentType: string; body: string };
    expect(multipart.contentType).toMatch(/^multipart\/form-data; boundary=/);
    expect(multipart.body).toContain('abc');
  });

  it('bounds the size and re-checks redirects', async () => {
    const guarded = createGuardedFetch({ allowPrivateNetworks: false, trustedHosts: ['127.0.0.1'], maxBytes: 1000 });
    await expect(guarded(`${base}/big`)).rejects.toMatchObject({ code: 'too_large' });
    await expect(guarded(`${base}/redirect`)).rejects.toMatchObject({ code: 'blocked_address' });
  });

  it('stops when the signal fires', async () => {
    const controller = new AbortController();
    controller.abort(new Error('cancelled'));
    await expect(createGuardedFetch({ allowPrivateNetworks: true })(`${base}/echo`, { signal: controller.signal })).rejects.toThrow('cancelled');
  });
});

describe('language models stream through doStream', () => {
  /** A LanguageModelV3 whose doStream sends these parts (and whose doGenerate must never be called). */
  function streamingModel(parts: unknown[]): AiSdkModel['model'] {
    return {
      specificationVersion: 'v3',
      provider: 'fake',
      modelId: 'streamer',
      supportedUrls: {},
      doGenerate: async () => {
        throw new Error('doGenerate must not be called: language models stream');
      },
      doStream: async () => ({
        stream: new ReadableStream({
          start(controller) {
            for (const p of parts) controller.enqueue(p);
            controller.close();
          },
        }),
      }),
    } as never;
  }

  function context(deltas: string[]) {
    return {
      generationId: 'gen_1',
      signal: new AbortController().signal,
      deadline: Date.now() + 10_000,
      claim: 1,
      files: { put: async () => 'k', fetch: () => Promise.reject(new Error('no media')) },
      logger: { debug() {}, info() {}, warn() {}, error() {} } as never,
      progress: () => undefined,
      output: { append: (t: string) => void deltas.push(t), preview: () => undefined },
    };
  }

  it('hands each text delta to ctx.output as it comes; the joined text is the result', async () => {
    const provider = createAiSdkProvider({
      models: [
        {
          modelId: 'chat',
          title: 'Chat',
          price: 1,
          model: streamingModel([
            { type: 'stream-start', warnings: [] },
            { type: 'text-start', id: 't' },
            { type: 'text-delta', id: 't', delta: 'Hello' },
            { type: 'text-delta', id: 't', delta: ', ' },
            { type: 'reasoning-delta', id: 'r', delta: 'not shown' },
            { type: 'text-delta', id: 't', delta: 'world' },
            { type: 'text-end', id: 't' },
            { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: {} },
          ]),
        },
      ],
    });
    const deltas: string[] = [];
    const out = await provider.generate({ model: provider.models[0]!, settings: { prompt: 'hi' } }, context(deltas));
    expect(out).toEqual({ text: 'Hello, world' });
    expect(deltas).toEqual(['Hello', ', ', 'world']);
  });

  it('an error part fails the run as a ProviderError; a content filter with no text says so', async () => {
    const failing = createAiSdkProvider({
      models: [
        { modelId: 'chat', title: 'Chat', price: 1, model: streamingModel([{ type: 'text-delta', id: 't', delta: 'par' }, { type: 'error', error: new Error('upstream broke mid-stream') }]) },
        { modelId: 'filtered', title: 'Filtered', price: 1, model: streamingModel([{ type: 'finish', finishReason: { unified: 'content-filter', raw: 'content_filter' }, usage: {} }]) },
      ],
    });
    const deltas: string[] = [];
    await expect(failing.generate({ model: failing.models[0]!, settings: { prompt: 'hi' } }, context(deltas))).rejects.toBeInstanceOf(ProviderError);
    expect(deltas).toEqual(['par']);
    await expect(failing.generate({ model: failing.models[1]!, settings: { prompt: 'hi' } }, context([]))).rejects.toThrow(/content filter/);
  });
});
