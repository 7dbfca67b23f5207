import { request as httpRequest, type ClientRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { until } from '../until.js';
import { expectError } from './expect-error.js';
import { PREVIEW_BYTES } from './fixture.js';
import { useFixture, withHeldGeneration, type ModeContext } from './kit.js';

/** Live status through the adapter: the event stream and the long-poll. */
export function defineLiveStatusTests({ fx }: ModeContext): void {
  describe('live status: event stream, long-poll', () => {
    /** Reads SSE messages from a fetch response until it ends or `count` are read; `onMessage` sees each as it comes. */
    async function readSse(
      res: Response,
      count = Infinity,
      onMessage: (msg: { id?: string; event?: string; data?: any; comment?: string }) => void = () => undefined,
    ): Promise<Array<{ id?: string; event?: string; data?: any; comment?: string }>> {
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      const out: Array<{ id?: string; event?: string; data?: any; comment?: string }> = [];
      let buffer = '';
      while (out.length < count) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let i: number;
        while ((i = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          const msg: { id?: string; event?: string; data?: any; comment?: string } = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) msg.comment = line.slice(1).trim();
            else if (line.startsWith('id: ')) msg.id = line.slice(4);
            else if (line.startsWith('event: ')) msg.event = line.slice(7);
            else if (line.startsWith('data: ')) msg.data = JSON.parse(line.slice(6));
          }
          out.push(msg);
          onMessage(msg);
        }
      }
      await reader.cancel().catch(() => undefined);
      return out;
    }

    it('streams a generation live through the adapter and ends after its terminal event', async () => {
      const user = await fx.user(100);
      await withHeldGeneration(fx, user, async (id) => {
        const res = await fetch(`${fx.baseUrl}/v1/generations/${id}/events`, { headers: user.auth });
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
        // The `processing` event shows the stream is live: only then may the run finish.
        const messages = await readSse(res, Infinity, (m) => m.event === 'processing' && fx.gate.open());
        fx.gate.close();
        expect(messages.map((m) => m.event)).toEqual(['processing', 'completed']);
        expect(messages[1]!.data).toMatchObject({ generationId: id, status: 'completed', price: 4 });
        expect(Number(messages[1]!.id)).toBeGreaterThan(Number(messages[0]!.id));
      });
    });

    it('streams partial output (output deltas, a preview as a signed file URL) through the adapter; the poll shape stays exact', async () => {
      const user = await fx.user(100);
      const before = fx.streamGate.total;
      const r = await fx.create(user, { modelId: 'streamed' });
      const id = r.body.generationId as string;
      await fx.streamGate.reached(before + 1);
      const res = await fetch(`${fx.baseUrl}/v1/generations/${id}/events`, { headers: user.auth });
      expect(res.status).toBe(200);
      const reading = readSse(res);
      // The preview is in the log once the details show it (it is written a window after the first delta).
      const shown = await until(() => fx.call(`/v1/generations/${id}/details`, { headers: user.auth }), { accept: (d) => Boolean(d.body.output?.preview), what: 'the preview in the details' });
      expect(shown.body.output).toEqual({ text: 'Hello', preview: { url: expect.stringContaining('/v1/files/'), mimeType: 'image/png' } });
      // The contract's poll, plain and long: nothing of the partial output.
      const poll = await fx.get(user, id);
      expect(poll.body).toEqual({ status: 'processing' });
      const longPoll = await fx.call(`/v1/generations/${id}`, { headers: { ...user.auth, prefer: 'wait=0' } });
      expect(longPoll.body).toEqual({ status: 'processing' });
      fx.streamGate.release();
      const messages = (await reading).filter((m) => m.comment === undefined);
      expect(messages[0]!.event).toBe('processing');
      expect(messages[messages.length - 1]!.event).toBe('completed');
      const outputs = messages.filter((m) => m.event === 'output');
      expect(outputs.map((m) => m.data.delta).join('')).toBe('Hello, world');
      for (const m of outputs) expect(Object.keys(m.data)).toEqual(['delta']);
      const previews = messages.filter((m) => m.event === 'preview');
      expect(previews).toHaveLength(1);
      expect(Object.keys(previews[0]!.data).sort()).toEqual(['mimeType', 'url']);
      expect(previews[0]!.data.mimeType).toBe('image/png');
      // The preview's URL is the service's own signed file URL, served through the adapter.
      const file = await fetch(previews[0]!.data.url);
      expect(file.status).toBe(200);
      expect(new Uint8Array(await file.arrayBuffer())).toEqual(PREVIEW_BYTES);
      // Messages in log order: the preview and the last delta come before the completion.
      expect(messages.findIndex((m) => m.event === 'preview')).toBeLessThan(messages.length - 1);
      const done = await fx.get(user, id);
      expect(Object.keys(done.body).sort()).toEqual(['price', 'result', 'status']);
      expect(done.body).toMatchObject({ status: 'completed', price: 2 });
    });

    it('answers 401 and 404 as JSON before any stream, and releases a stream whose client went away', async () => {
      const user = await fx.user(100);
      const other = await fx.user(100);
      await withHeldGeneration(fx, user, async (id) => {
        const path = `/v1/generations/${id}/events`;
        expectError(await fx.call(path, {}), 401, 'unauthorized');
        const theirs = await fx.call(path, { headers: other.auth });
        expectError(theirs, 404, 'not_found');
        expect(theirs.text).toBe((await fx.call(`/v1/generations/${'Q'.repeat(22)}/events`, { headers: other.auth })).text);
        const watchersBefore = fx.service.stats().watchers;
        for (let i = 0; i < 5; i++) {
          const controller = new AbortController();
          const res = await fetch(`${fx.baseUrl}${path}`, { headers: user.auth, signal: controller.signal });
          const first = await readSse(res, 1).catch(() => []);
          expect(first[0]?.event).toBe('processing');
          controller.abort();
        }
        await until(() => fx.service.stats().watchers <= watchersBefore, 'the streams of the clients that went away to be released');
        expect(fx.service.stats().watchers).toBe(watchersBefore);
      });
    });

    it('Prefer: wait=N answers as soon as the status changes, with Preference-Applied', async () => {
      const user = await fx.user(100);
      await withHeldGeneration(fx, user, async (id) => {
        const watchersBefore = fx.service.stats().watchers;
        const waiting = fx.call(`/v1/generations/${id}`, { headers: { ...user.auth, prefer: 'wait=20' } });
        // The long-poll waits as a watcher of the generation: once it is one, the run may finish.
        await until(() => fx.service.stats().watchers > watchersBefore, 'the long-poll to wait for the next event');
        fx.gate.open();
        const res = await waiting;
        fx.gate.close();
        expect(res.status).toBe(200);
        expect(res.headers.get('preference-applied')).toBe('wait=20');
        expect(res.body).toMatchObject({ status: 'completed', price: 4 });
        expect(Object.keys(res.body).sort()).toEqual(['price', 'result', 'status']);
      });
    });
  });
}

/** The cap on open streams per user. */
export function defineStreamCapTests({ mount, mode }: ModeContext): void {
  describe('stream caps (issue 24, item 1)', () => {
    const capped = useFixture(mount, mode, { limits: { streamsPerUser: 2 } });

    it('answers the stream past limits.streamsPerUser with 429 and Retry-After; a client that goes away frees its slot', async () => {
      const user = await capped.user(100);
      const id = (await capped.create(user, { modelId: 'held' })).body.generationId as string;
      const url = new URL(`${capped.baseUrl}/v1/generations/${id}/events`);
      // Plain node:http with its own socket each, so that going away closes the socket as a closed browser tab does.
      const clients: ClientRequest[] = [];
      const open = (): Promise<{ status: number; retryAfter?: string; body: string }> =>
        new Promise((resolve, reject) => {
          const req = httpRequest(url, { headers: user.auth, agent: false }, (res) => {
            if (res.statusCode === 200) return resolve({ status: 200, body: '' });
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (body += chunk));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body }));
          });
          req.on('error', reject);
          req.end();
          clients.push(req);
        });
      try {
        expect((await open()).status).toBe(200);
        expect((await open()).status).toBe(200);
        const third = await open();
        expect(third.status).toBe(429);
        expect(third.retryAfter).toMatch(/^[1-9]\d*$/);
        expect((JSON.parse(third.body) as { error: { code: string } }).error.code).toBe('rate_limited');
        // The first client goes away: once the server has seen it, that stream's slot is free again.
        clients[0]!.destroy();
        const status = await until(async () => (await open()).status, { accept: (s) => s !== 429, what: 'the slot of the client that went away' });
        expect(status).toBe(200);
        expect((await open()).status).toBe(429);
      } finally {
        for (const c of clients) c.destroy();
        capped.gate.open();
        await capped.terminal(user, id).catch(() => undefined);
        capped.gate.close();
      }
    });
  });
}
