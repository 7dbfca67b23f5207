import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { blockedAddressReason, fetchMedia, MediaFetchError, type FetchMediaOptions, type ResolvedAddress } from '@genservice/core';

/** One HTTP server on 127.0.0.1 whose routes the tests set; it counts requests so a refusal can be shown to send none. */
class TestServer {
  readonly server: Server;
  readonly hits: string[] = [];
  routes: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {};
  port = 0;

  constructor() {
    this.server = createHttpServer((req, res) => {
      this.hits.push(req.url ?? '');
      const route = this.routes[(req.url ?? '').split('?')[0]];
      if (route) route(req, res);
      else {
        res.statusCode = 404;
        res.end('no such route');
      }
    });
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const media = new TestServer();
const other = new TestServer();
/** Accepts connections and never says a word. */
let silent: TcpServer;
let silentPort = 0;
const silentSockets = new Set<Socket>();

beforeAll(async () => {
  await media.start();
  await other.start();
  silent = createTcpServer((socket) => {
    silentSockets.add(socket);
    socket.on('close', () => silentSockets.delete(socket));
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  silentPort = (silent.address() as AddressInfo).port;
  media.routes['/cat.png'] = (_req, res) => {
    res.setHeader('content-type', 'image/png');
    res.end(Buffer.from('pretend png bytes'));
  };
});

afterAll(async () => {
  for (const socket of silentSockets) socket.destroy();
  await Promise.all([media.stop(), other.stop(), new Promise<void>((resolve) => silent.close(() => resolve()))]);
});

/**
 * Test DNS: `media.test` and `evil.test` both point at 127.0.0.1, and only `media.test` is trusted. That makes the
 * first hop of a redirect allowed and its target refused, so the re-check on every hop is what the test observes.
 */
function testDns(overrides: Record<string, string[]> = {}): { lookup: (host: string) => Promise<ResolvedAddress[]>; calls: string[] } {
  const table: Record<string, string[]> = { 'media.test': ['127.0.0.1'], 'evil.test': ['127.0.0.1'], ...overrides };
  const calls: string[] = [];
  return {
    calls,
    lookup: async (host) => {
      calls.push(host);
      const addresses = table[host];
      if (!addresses) throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    },
  };
}

function trusted(extra: FetchMediaOptions = {}): FetchMediaOptions {
  return { trustedHosts: ['media.test'], lookup: testDns().lookup, timeoutMs: 2000, ...extra };
}

async function refusal(url: string, options: FetchMediaOptions = {}): Promise<MediaFetchError> {
  const error = await fetchMedia(url, { timeoutMs: 2000, ...options }).then(
    () => {
      throw new Error(`${url} was fetched`);
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(MediaFetchError);
  return error as MediaFetchError;
}

describe('fetchMedia refuses hostile URLs before connecting', () => {
  it('non-http schemes and malformed URLs', async () => {
    for (const url of ['file:///etc/passwd', 'ftp://example.com/x.png', 'gopher://example.com/', 'data:image/png;base64,AAAA', 'javascript:alert(1)', 'not a url', 'http://']) {
      expect((await refusal(url)).code).toBe('invalid_url');
    }
    expect((await refusal('http://user:secret@example.com/x.png')).message).not.toContain('secret');
  });

  it('loopback, private, link-local and metadata addresses in every spelling', async () => {
    const port = media.port;
    const before = media.hits.length;
    const hostile = [
      `http://127.0.0.1:${port}/cat.png`,
      `http://127.1.2.3:${port}/cat.png`,
      `http://localhost:${port}/cat.png`,
      `http://LOCALHOST.:${port}/cat.png`,
      `http://[::1]:${port}/cat.png`,
      `http://0x7f000001:${port}/cat.png`,
      `http://2130706433:${port}/cat.png`,
      `http://0177.0.0.1:${port}/cat.png`,
      `http://[::ffff:127.0.0.1]:${port}/cat.png`,
      `http://[::ffff:7f00:1]:${port}/cat.png`,
      'http://0.0.0.0/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:169.254.169.254]/latest/meta-data/',
      'http://10.0.0.1/',
      'http://172.16.5.4/',
      'http://192.168.1.1/',
      'http://100.64.0.1/',
      'http://224.0.0.1/',
      'http://255.255.255.255/',
      'http://[fc00::1]/',
      'http://[fd12:3456::1]/',
      'http://[fe80::1]/',
      'http://[ff02::1]/',
      'http://[::]/',
      'http://[64:ff9b::7f00:1]/',
      'http://[2002:7f00:1::]/',
      'https://127.0.0.1/',
      // issue 24, item 5: SIIT, local-use NAT64 and Teredo forms of 127.0.0.1.
      `http://[::ffff:0:7f00:1]:${port}/cat.png`,
      `http://[64:ff9b:1::7f00:1]:${port}/cat.png`,
      'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/',
    ];
    for (const url of hostile) {
      const error = await refusal(url);
      expect(error.code, url).toBe('blocked_address');
      expect(error.retryable).toBe(false);
      expect(error.message).toMatch(/^refusing to fetch/);
    }
    expect(media.hits.length).toBe(before);
  });

  it('a host name that resolves to loopback, or to a mix of public and private addresses', async () => {
    const dns = testDns({ 'mixed.test': ['93.184.216.34', '10.1.2.3'], 'v6.test': ['::1'] });
    for (const host of ['evil.test', 'mixed.test', 'v6.test']) {
      const error = await refusal(`http://${host}:${media.port}/cat.png`, { lookup: dns.lookup });
      expect(error.code).toBe('blocked_address');
      expect(error.message).not.toContain('resolves to');
      expect(error.message).not.toMatch(/127\.0\.0\.1|10\.1\.2\.3|::1/);
    }
    expect((await refusal('http://nowhere.test/', { lookup: dns.lookup })).code).toBe('dns_failure');
  });

  it('a refusal of a host name says the URL is not allowed, never what the resolver saw (issue 24, item 6)', async () => {
    const dns = testDns({ 'metadata.test': ['169.254.169.254'], 'internal.test': ['10.0.0.7'] });
    const messages = new Set<string>();
    for (const host of ['localhost', 'metadata.test', 'internal.test', 'nowhere.test', 'evil.test']) {
      const error = await refusal(`http://${host}/x`, { lookup: host === 'localhost' ? undefined : dns.lookup });
      expect(error.message).not.toMatch(/resolves to|cannot resolve|127\.|169\.254|10\.0\.0\.7|loopback|link-local|private|no addresses/);
      messages.add(error.message.replace(host, 'HOST'));
    }
    // Resolving to a refused address, or not at all, reads the same.
    expect([...messages]).toEqual(['refusing to fetch http://HOST/x: the URL is not allowed (its host must resolve to public addresses only)']);
  });

  it('a redirect from an allowed server to a loopback one is re-checked and refused', async () => {
    media.routes['/to-ip'] = (_req, res) => {
      res.writeHead(302, { location: `http://127.0.0.1:${other.port}/secret` });
      res.end();
    };
    media.routes['/to-evil'] = (_req, res) => {
      res.writeHead(307, { location: `http://evil.test:${other.port}/secret` });
      res.end();
    };
    media.routes['/to-metadata'] = (_req, res) => {
      res.writeHead(301, { location: 'http://169.254.169.254/latest/meta-data/' });
      res.end();
    };
    media.routes['/to-file'] = (_req, res) => {
      res.writeHead(302, { location: 'file:///etc/passwd' });
      res.end();
    };
    other.routes['/secret'] = (_req, res) => res.end('internal data');
    for (const path of ['/to-ip', '/to-evil', '/to-metadata']) {
      const error = await refusal(`http://media.test:${media.port}${path}`, trusted());
      expect(error.code, path).toBe('blocked_address');
    }
    expect((await refusal(`http://media.test:${media.port}/to-file`, trusted())).code).toBe('invalid_url');
    expect(other.hits).toEqual([]);
  });

  it('too many redirects', async () => {
    media.routes['/loop'] = (_req, res) => {
      res.writeHead(302, { location: '/loop' });
      res.end();
    };
    const before = media.hits.length;
    const error = await refusal(`http://media.test:${media.port}/loop`, trusted({ maxRedirects: 2 }));
    expect(error.code).toBe('too_many_redirects');
    expect(media.hits.length - before).toBe(3);
  });

  it('a body larger than maxBytes, declared or streamed', async () => {
    const big = Buffer.alloc(64 * 1024, 1);
    media.routes['/declared'] = (_req, res) => res.end(big);
    media.routes['/streamed'] = (_req, res) => {
      // Chunked with no Content-Length: the limit has to be enforced while reading.
      res.write(big);
      res.write(big);
      setTimeout(() => res.end(big), 20);
    };
    expect((await refusal(`http://media.test:${media.port}/declared`, trusted({ maxBytes: 1000 }))).code).toBe('too_large');
    expect((await refusal(`http://media.test:${media.port}/streamed`, trusted({ maxBytes: 100_000 }))).code).toBe('too_large');
  });

  it('a server that never answers, or stalls mid-body, times out', async () => {
    const error = await refusal(`http://media.test:${silentPort}/`, trusted({ timeoutMs: 300 }));
    expect(error.code).toBe('timeout');
    media.routes['/stall'] = (_req, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('partial');
    };
    // The code is the mechanism: only the fetch's own timer answers 'timeout' (the servers never end on their own).
    expect((await refusal(`http://media.test:${media.port}/stall`, trusted({ timeoutMs: 300 }))).code).toBe('timeout');
  });

  it('error statuses, with 5xx marked retryable', async () => {
    media.routes['/busy'] = (_req, res) => {
      res.statusCode = 503;
      res.end();
    };
    const missing = await refusal(`http://media.test:${media.port}/missing?token=s3cret`, trusted());
    expect(missing).toMatchObject({ code: 'http_status', retryable: false });
    // Query strings often carry signed tokens; they stay out of messages that end up in logs.
    expect(missing.message).not.toContain('s3cret');
    expect(await refusal(`http://media.test:${media.port}/busy`, trusted())).toMatchObject({ code: 'http_status', retryable: true });
  });
});

describe('fetchMedia fetches what is allowed', () => {
  it('follows an allowed redirect and returns the bytes and content type', async () => {
    media.routes['/moved'] = (_req, res) => {
      res.writeHead(301, { location: '/cat.png' });
      res.end();
    };
    const got = await fetchMedia(`http://media.test:${media.port}/moved?token=abc`, trusted());
    expect(Buffer.from(got.bytes).toString()).toBe('pretend png bytes');
    expect(got.contentType).toBe('image/png');
    expect(got.url).toBe(`http://media.test:${media.port}/cat.png`);
  });

  it('connects to the address it checked, without a second DNS lookup', async () => {
    // A rebinding resolver: the first answer passes the check, later answers point elsewhere.
    const calls: string[] = [];
    let answer = '127.0.0.1';
    const lookup = async (host: string): Promise<ResolvedAddress[]> => {
      calls.push(host);
      const address = answer;
      answer = '10.9.9.9';
      return [{ address, family: 4 }];
    };
    const got = await fetchMedia(`http://media.test:${media.port}/cat.png`, { trustedHosts: ['media.test'], lookup, timeoutMs: 2000 });
    expect(Buffer.from(got.bytes).toString()).toBe('pretend png bytes');
    expect(calls).toEqual(['media.test']);
  });

  it('allowPrivateNetworks lets a host opt in to local addresses', async () => {
    const got = await fetchMedia(`http://127.0.0.1:${media.port}/cat.png`, { allowPrivateNetworks: true });
    expect(got.bytes.length).toBe(17);
  });

  it('rejects with the caller signal reason when aborted', async () => {
    const controller = new AbortController();
    const reason = new Error('generation cancelled');
    setTimeout(() => controller.abort(reason), 50);
    // Rejecting with the signal's own reason (not the 5 s timeout's error) is what shows the abort ended it.
    await expect(fetchMedia(`http://media.test:${silentPort}/`, trusted({ signal: controller.signal, timeoutMs: 5000 }))).rejects.toBe(reason);
  });
});

describe('blockedAddressReason', () => {
  it('classifies addresses', () => {
    const blocked = ['127.0.0.1', '10.255.0.1', '172.31.255.255', '192.168.0.1', '169.254.169.254', '100.127.255.255', '0.1.2.3', '::1', '::', 'fe80::1%eth0', 'fc00::', '::ffff:10.0.0.1', '::ffff:a00:1', '::10.0.0.1', 'ff05::2'];
    const allowed = ['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8', '2002:808:808::'];
    for (const address of blocked) expect(blockedAddressReason(address), address).not.toBeNull();
    for (const address of allowed) expect(blockedAddressReason(address), address).toBeNull();
  });

  it('refuses every IPv6 form that embeds a refused IPv4 address, and special ranges the old table missed (issue 24, item 5)', () => {
    const blocked = [
      '::ffff:0:7f00:1', // SIIT (RFC 6145) 127.0.0.1
      '::ffff:0:a9fe:a9fe', // SIIT 169.254.169.254
      '64:ff9b:1::7f00:1', // local-use NAT64 (RFC 8215)
      '64:ff9b:1:abcd::5db8:d822', // local-use NAT64, whatever it embeds
      '64:ff9b::a00:1', // NAT64 10.0.0.1
      '2001:0:4136:e378:8000:63bf:80ff:fffe', // Teredo, client 127.0.0.1
      '2001:0:7f00:1:8000:63bf:a2ed:29db', // Teredo, server 127.0.0.1
      '2002:a9fe:a9fe::1', // 6to4 169.254.169.254
      '::7f00:1', // IPv4-compatible
      '2001:2::1', // benchmarking
      '2001:db8::1', // documentation
      '3fff::1', // documentation (RFC 9637)
      '192.31.196.1', // AS112
      '192.52.193.1', // AMT
    ];
    for (const address of blocked) expect(blockedAddressReason(address), address).not.toBeNull();
    expect(blockedAddressReason('::ffff:0:7f00:1')).toContain('loopback');
    expect(blockedAddressReason('2001:0:4136:e378:8000:63bf:80ff:fffe')).toContain('loopback');
    // Forms embedding a public IPv4 address stay usable (an IPv6-only host reaches IPv4 sites through NAT64).
    for (const address of ['64:ff9b::5db8:d822', '::ffff:0:808:808', '2002:5db8:d822::1', '2001:0:4136:e378:8000:63bf:a247:2ddd']) {
      expect(blockedAddressReason(address), address).toBeNull();
    }
    expect(blockedAddressReason('example.com')).toBe('not an IP address');
  });
});

describe('a refused webhook URL through the API (issue 24, item 6)', () => {
  it('POST /v1/quotes says the URL is not allowed, not what localhost resolves to', async () => {
    const { createGenerationService, MemoryApiKeyStore } = await import('@genservice/core');
    const service = createGenerationService({
      providers: [{ models: [{ modelId: 'm', title: 'M', resultType: 'text', estimatedGenerationTime: 1, settings: [], price: 1 }], generate: async () => ({ text: 'x' }) }],
      apiKeys: new MemoryApiKeyStore({ keys: [{ apiKey: 'k', userId: 'u' }] }),
    });
    const r = await service.handle({
      method: 'POST',
      path: '/v1/quotes',
      headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
      body: JSON.stringify({ modelId: 'm', webhook: { url: 'https://localhost/hook' } }),
    });
    expect(r.status).toBe(400);
    const error = JSON.parse(String(r.body)).error as { message: string; details: Array<{ field: string; message: string }> };
    expect(error.details[0]!.field).toBe('webhook.url');
    expect(String(r.body)).not.toMatch(/127\.0\.0\.1|::1|resolves to|loopback/);
    expect(error.details[0]!.message).toContain('not allowed');
  });
});
