// Debian's Chromium driven by playwright-core (never a downloaded browser): `.ci/run` installs the `chromium` package
// when it is missing, so these tests run everywhere CI does and are never skipped.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
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
