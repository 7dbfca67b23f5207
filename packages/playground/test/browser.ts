// Debian's Chromium driven by playwright-core (never a downloaded browser): `.ci/run` installs the `chromium` package
// when it is missing, so these tests run everywhere CI does and are never skipped.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { GenerationService } from '@genservice/core';
import { bodyLimitsOf, handleNodeRequest, isApiPath, writeNodeResponse } from '@genservice/core/adapter';
import { chromium, type Browser } from 'playwright-core';

/** Where the screenshots of each result are kept (a CI artifact folder, ignored by git). */
export const ARTIFACTS = fileURLToPath(new URL('../test-artifacts/', import.meta.url));

function chromiumPath(): string {
  try {
    return execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('Chromium is not installed: `apt-get install -y chromium` (.ci/run does this when it is missing)');
  }
}

export async function launchChromium(): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({
    executablePath: chromiumPath(),
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-quic',
      '--no-first-run',
      '--disable-sync',
      // WebGL on the CPU (SwiftShader), for the 3D view: there is no GPU here and Chromium no longer falls back by itself.
      '--use-angle=swiftshader',
      '--enable-unsafe-swiftshader',
    ],
  });
}

/** `service` on a plain Node server at `<base>` = `http://127.0.0.1:<port>/api` (its API paths only; 404 for the rest). */
export async function serveAtApi(service: GenerationService): Promise<{ server: Server; base: string }> {
  const limits = bodyLimitsOf(service);
  let base = '';
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!.replace(/^\/api/, '');
    if (!(req.url ?? '').startsWith('/api/') || !isApiPath(path, service)) return void res.writeHead(404).end();
    req.url = req.url!.slice('/api'.length);
    handleNodeRequest(service, req, { limits, origin: () => base, remoteAddress: req.socket.remoteAddress }).then((out) => writeNodeResponse(res, out));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
  return { server, base };
}
