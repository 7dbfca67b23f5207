/**
 * Hostile requests to the MCP endpoint on real hosts: each is refused with a protocol answer of its own (no internal
 * message, nothing created or charged).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADAPTERS, type Host, images, newUser, startHost } from './helpers.js';

afterAll(() => images.close());

async function postRaw(host: Host, apiKey: string, body: string): Promise<Response> {
  return fetch(host.mcpUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    body,
  });
}

describe.each(ADAPTERS)('hostile MCP requests on %s', (adapter) => {
  let host: Host;
  beforeAll(async () => {
    host = await startHost(adapter);
  });
  afterAll(async () => {
    await host.close();
  });

  it('a message nested deeper than any tool takes is a 400 Invalid Request, not an internal error, and creates nothing', async () => {
    const u = await newUser(host.service, 100);
    const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    const res = await postRaw(host, u.apiKey, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"demo-text","arguments":{"prompt":${deep}}}}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: number; message: string } };
    expect(body.error.code).toBe(-32600);
    expect(body.error.message).not.toMatch(/call stack/i);
    expect(await host.service.balance(u.userId)).toBe(100);
    expect((await host.service.list(u.userId, { baseUrl: `${host.origin}/api` })).data).toHaveLength(0);
  });
});
