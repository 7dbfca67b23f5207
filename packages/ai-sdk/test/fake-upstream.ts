import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { GenerationItem, GenerationService, Logger } from '@genservice/core';
import { encodePng } from '@genservice/demo-models';
import { until } from '@genservice/testing';

export const PNG = encodePng({ width: 2, height: 2, data: new Uint8Array(16).fill(90) }, { alpha: false });
/** An ID3 tag, then an MPEG-1 layer III frame header: what OpenAI's speech endpoint sends (mp3). */
export const MP3 = Uint8Array.from([0x49, 0x44, 0x33, 0x04, 0x00, 0x00, 0, 0, 0, 0, 0xff, 0xfb, 0x90, 0x64, 0, 0, 0, 0]);
export const WAV = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(4), Buffer.from('WAVEfmt '), Buffer.alloc(32)]);
/** The start of an MP4 file: an `ftyp` box of brand isom. */
export const MP4 = Buffer.concat([Buffer.from([0, 0, 0, 0x18]), Buffer.from('ftypisom'), Buffer.alloc(12), Buffer.from('moov')]);

/** A JPEG's first bytes (SOI, APP0 JFIF): enough to be known by its magic number. */
export const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]), Buffer.from('JFIF\0'), Buffer.alloc(32)]);

export interface SeenRequest {
  method: string;
  path: string;
  host?: string;
  authorization?: string;
  contentType?: string;
  body: Buffer;
}

function read(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('close', () => resolve(Buffer.concat(chunks)));
  });
}

/**
 * A local stand-in for api.openai.com/v1, fal.run, queue.fal.run and api.replicate.com/v1, speaking their documented wire formats as the
 * real `@ai-sdk/openai` and `@ai-sdk/fal` packages send and parse them:
 *
 * - POST /v1/images/generations (JSON) and /v1/images/edits (multipart) -> `{ created, data: [{ b64_json }] }`
 * - POST /v1/audio/speech (JSON) -> the audio bytes (mp3)
 * - POST /v1/audio/transcriptions (multipart) -> `{ text, language, duration, segments }`
 * - POST /v1/chat/completions (JSON) -> a chat.completion echoing the user message (`forbidden`: no content,
 *   finish_reason content_filter); with `stream: true`, the same as chat.completion.chunk events, word by word
 * - POST /fal-ai/flux/schnell (fal.run, sync) -> `{ images: [{ url, content_type }] }`, the URL on the Host the client
 *   used; POST /fal-ai/elsewhere answers a URL on 127.0.0.1 whatever the Host
 * - POST /fal-ai/luma-dream-machine (queue.fal.run) -> `{ request_id, response_url }`; GET the response_url ->
 *   `{ video: { url, content_type } }`
 * - POST /models/{owner}/{name}/predictions (api.replicate.com/v1, `Prefer: wait`) -> `{ status: 'succeeded', output: [url] }`
 * - GET /files/* -> the files those URLs name
 *
 * `failNext(path, status)` makes the next request to a path fail with an OpenAI-shaped error body; `hold(path)` makes
 * requests to it never answer (and counts the ones the client closed).
 */
export class FakeUpstream {
  readonly seen: SeenRequest[] = [];
  closedEarly = 0;
  /** Requests that arrived on a held path (and wait there). */
  holding = 0;
  base = '';
  private server?: Server;
  private readonly failures = new Map<string, Array<{ status: number; message: string }>>();
  private readonly held = new Set<string>();

  failNext(path: string, status: number, message = status === 429 ? 'Rate limit reached for requests' : 'Something went wrong'): void {
    const list = this.failures.get(path) ?? [];
    list.push({ status, message });
    this.failures.set(path, list);
  }

  hold(path: string): void {
    this.held.add(path);
  }

  release(path: string): void {
    this.held.delete(path);
  }

  /** The requests to a path, oldest first. */
  to(path: string): SeenRequest[] {
    return this.seen.filter((s) => s.path === path);
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => void this.answer(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.base = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  get port(): number {
    return (this.server!.address() as { port: number }).port;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server?.closeAllConnections();
      this.server?.close(() => resolve());
    });
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    if (this.held.has(path)) {
      req.on('close', () => this.closedEarly++);
      this.holding++;
      return;
    }
    const body = await read(req);
    this.seen.push({
      method: req.method ?? '',
      path,
      host: req.headers.host,
      authorization: req.headers.authorization,
      contentType: req.headers['content-type'],
      body,
    });
    const json = (status: number, value: unknown): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    const failure = this.failures.get(path)?.shift();
    if (failure) {
      return json(failure.status, { error: { message: failure.message, type: 'invalid_request_error', code: null, param: null } });
    }
    const file = (type: string, bytes: Uint8Array): void => void res.writeHead(200, { 'content-type': type, 'content-length': bytes.length }).end(Buffer.from(bytes));
    switch (path) {
      case '/v1/images/generations':
      case '/v1/images/edits':
        return json(200, { created: 1_700_000_000, data: [{ b64_json: Buffer.from(PNG).toString('base64') }] });
      case '/v1/audio/speech':
        return void res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(Buffer.from(MP3));
      case '/v1/audio/transcriptions':
        return json(200, { text: 'hello from the recording', language: 'english', duration: 1.5, segments: [] });
      case '/v1/chat/completions': {
        const request = JSON.parse(body.toString('utf8')) as { messages: Array<{ role: string; content: string }>; stream?: boolean };
        const user = request.messages.find((m) => m.role === 'user')?.content;
        const filtered = user === 'forbidden';
        if (request.stream) {
          // Server-sent chat.completion.chunk messages: the answer word by word, then the finish and usage.
          const answer = filtered ? [] : `You said: ${typeof user === 'string' ? user : JSON.stringify(user)}`.match(/\s*\S+/g) ?? [];
          const chunk = (delta: Record<string, unknown>, finish: string | null, usage?: unknown): string =>
            `data: ${JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(chunk({ role: 'assistant', content: '' }, null));
          for (const word of answer) res.write(chunk({ content: word }, null));
          res.write(chunk({}, filtered ? 'content_filter' : 'stop', { prompt_tokens: 5, completion_tokens: answer.length, total_tokens: 5 + answer.length }));
          return void res.end('data: [DONE]\n\n');
        }
        return json(200, {
          id: 'chatcmpl-1',
          object: 'chat.completion',
          created: 1_700_000_000,
          model: 'gpt-4o-mini',
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: filtered ? null : `You said: ${typeof user === 'string' ? user : JSON.stringify(user)}` },
              finish_reason: filtered ? 'content_filter' : 'stop',
            },
          ],
          usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
        });
      }
      case '/fal-ai/flux/schnell':
        return json(200, {
          images: [{ url: `http://${req.headers.host}/files/result.png`, width: 2, height: 2, content_type: 'image/png' }],
          seed: 1,
          has_nsfw_concepts: [false],
        });
      case '/fal-ai/elsewhere':
        return json(200, { images: [{ url: `${this.base}/files/result.png`, width: 2, height: 2, content_type: 'image/png' }] });
      case '/fal-ai/luma-dream-machine':
        return json(200, { request_id: 'req-1', response_url: `${this.base}/fal-ai/luma-dream-machine/requests/req-1` });
      case '/fal-ai/luma-dream-machine/requests/req-1':
        // fal's own URL says octet-stream; the model says video/mp4.
        return json(200, { video: { url: `${this.base}/files/result.mp4`, content_type: 'video/mp4' }, seed: 3 });
      case '/models/black-forest-labs/flux-schnell/predictions':
        // Replicate's sync mode (Prefer: wait): the finished prediction, its output a list of file URLs.
        return json(201, { id: 'p1', status: 'succeeded', output: [`${this.base}/files/result.jpg`] });
      case '/files/result.jpg':
        return file('application/octet-stream', JPEG);
      case '/files/result.png':
      case '/files/input.png':
        return file('image/png', PNG);
      case '/files/speech.wav':
        return file('audio/wav', WAV);
      case '/files/result.mp4':
        return file('application/octet-stream', MP4);
      default:
        return json(404, { error: { message: 'no such route' } });
    }
  }
}

/** A logger that keeps what it is given, for checking warnings. */
export function recordingLogger(): { logger: Logger; warnings: Array<{ obj: Record<string, unknown>; msg?: string }> } {
  const warnings: Array<{ obj: Record<string, unknown>; msg?: string }> = [];
  const logger: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (obj, msg) => void warnings.push({ obj, msg }),
    error: () => undefined,
    child: () => logger,
  };
  return { logger, warnings };
}

/** Creates a generation and waits until it is completed or failed; returns its details view. */
export async function runToEnd(service: GenerationService, modelId: string, settings: Record<string, unknown>, userId = 'u'): Promise<GenerationItem> {
  const { generationId } = await service.create(userId, { modelId, settings });
  return until(() => service.details(userId, generationId), { accept: (d) => d.status === 'completed' || d.status === 'failed', timeoutMs: 15_000 });
}
