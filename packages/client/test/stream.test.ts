// The event stream as servers and proxies really send it: CR or CRLF line ends, data split over lines and chunks,
// comments, an id that stays set for the messages after it.
import { describe, expect, it } from 'vitest';
import { createClient, type GenerationStatus } from '../src/index.js';
import { BASE_URL, json, model } from './helpers.js';

function eventStream(chunks: string[]): Response {
  const bytes = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const c of chunks) controller.enqueue(bytes.encode(c));
      controller.close();
    },
  });
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8' } });
}

describe('the live stream parser', () => {
  it('reads CR and CRLF line ends, multi-line data, comments and chunks split anywhere; resumes after the last id', async () => {
    const opens: Array<string | null> = [];
    const requests: string[] = [];
    const fetch = async (input: string, init: RequestInit): Promise<Response> => {
      const path = String(input).slice(BASE_URL.length);
      requests.push(`${init.method ?? 'GET'} ${path}`);
      if (path === '/v1/models') return json(200, { models: [model('m', 1)] });
      if (path.endsWith('/events')) {
        opens.push(new Headers(init.headers).get('last-event-id'));
        if (opens.length === 1) {
          // CRLF ends, a comment, one message's data on two lines, split mid-line across chunks; then an `event:`
          // without an id (the last id stays 7), and the connection ends before the generation does.
          return eventStream([
            ': keep-alive\r\n\r\nid: 7\r\nevent: generation.pend',
            'ing\r\ndata: {"generationId":"g1",\r\ndata: "status":"pending"}\r\n\r',
            '\nevent: generation.processing\rdata: {"generationId":"g1","status":"processing"}\r\r',
          ]);
        }
        return eventStream(['id: 9\revent: generation.completed\rdata: {"generationId":"g1","status":"completed","result":"done","price":2}\r\r']);
      }
      throw new Error(`unexpected ${path}`);
    };
    const client = createClient({ baseUrl: BASE_URL, apiKey: 'k', fetch });
    const statuses: GenerationStatus[] = [];
    const done = await client.generations.waitFor('g1', { onStatus: (s) => statuses.push(s), timeoutMs: 10_000 });
    expect(done).toMatchObject({ status: 'completed', result: 'done', price: 2 });
    expect(statuses).toEqual(['pending', 'processing', 'completed']);
    expect(opens).toEqual([null, '7']);
    expect(requests.filter((r) => r.startsWith('GET /v1/generations/'))).toEqual(['GET /v1/generations/g1/events', 'GET /v1/generations/g1/events']);
  });

  it('hands queue positions to onQueue (the pending state and each `queue` message) and keeps following the stream', async () => {
    const requests: string[] = [];
    const fetch = async (input: string, init: RequestInit): Promise<Response> => {
      const path = String(input).slice(BASE_URL.length);
      requests.push(`${init.method ?? 'GET'} ${path}`);
      if (path === '/v1/models') return json(200, { models: [model('m', 1)] });
      if (path.endsWith('/events')) {
        return eventStream([
          'id: 1\nevent: created\ndata: {"generationId":"g1","modelId":"m","status":"pending","queue":{"position":3,"aheadOfYou":2,"etaSeconds":null}}\n\n',
          'id: 1\nevent: queue\ndata: {"position":2,"aheadOfYou":1,"etaSeconds":4}\n\n',
          'id: 1\nevent: queue\ndata: {"position":1,"aheadOfYou":0,"etaSeconds":2}\n\n',
          'id: 2\nevent: processing\ndata: {"generationId":"g1","status":"processing"}\n\n',
          'id: 3\nevent: completed\ndata: {"generationId":"g1","status":"completed","result":"done","price":2}\n\n',
        ]);
      }
      throw new Error(`unexpected ${path}`);
    };
    const client = createClient({ baseUrl: BASE_URL, apiKey: 'k', fetch });
    const statuses: GenerationStatus[] = [];
    const queue: Array<{ position: number; aheadOfYou: number; etaSeconds: number | null }> = [];
    const done = await client.generations.waitFor('g1', { onStatus: (s) => statuses.push(s), onQueue: (q) => queue.push(q), timeoutMs: 10_000 });
    expect(done).toMatchObject({ status: 'completed', result: 'done' });
    expect(statuses).toEqual(['pending', 'processing', 'completed']);
    expect(queue).toEqual([
      { position: 3, aheadOfYou: 2, etaSeconds: null },
      { position: 2, aheadOfYou: 1, etaSeconds: 4 },
      { position: 1, aheadOfYou: 0, etaSeconds: 2 },
    ]);
    // Followed to the end on the stream: no poll.
    expect(requests.filter((r) => r.startsWith('GET /v1/generations/'))).toEqual(['GET /v1/generations/g1/events']);
  });

  it('polls when a stream keeps breaking before any message', async () => {
    let opens = 0;
    let polls = 0;
    const fetch = async (input: string): Promise<Response> => {
      const path = String(input).slice(BASE_URL.length);
      if (path === '/v1/models') return json(200, { models: [model('m', 0.01)] });
      if (path.endsWith('/events')) {
        opens += 1;
        return opens === 1 ? eventStream(['id: 1\ndata: {"generationId":"g1","status":"pending"}\n\n']) : eventStream([': nothing\n\n']);
      }
      polls += 1;
      return json(200, { status: 'completed', result: 'polled', price: 1 });
    };
    const client = createClient({ baseUrl: BASE_URL, apiKey: 'k', fetch });
    expect(await client.generations.waitFor('g1', { timeoutMs: 10_000 })).toMatchObject({ status: 'completed', result: 'polled' });
    // One stream that delivered, then three resumes in a row that brought nothing.
    expect(opens).toBe(4);
    expect(polls).toBe(1);
  });
});
