/**
 * Machine instructions per in-memory generation (POST /v1/generations through `service.handle`, run to completed),
 * counted by valgrind (callgrind), not timed. Not as steady as first thought: in five runs of one build on a quiet
 * machine (2026-11-28) the run of 3,000 generations counted 7,083M to 7,327M instructions and that of 7,000 7,589M to
 * 7,740M, so the difference over 4,000 printed anywhere from 93,633 to 162,420 per generation (earlier machines agreed
 * within a few per cent). Run it several times and take only differences well beyond that spread. For comparing two
 * builds of core side by side (issue 36); not part of `pnpm bench`, run by hand:
 *
 *   cd bench && node --import tsx instructions.ts [dist ...]
 *
 * Each `dist` is a directory holding a build of `@genservice/core` (`index.js`), default `../packages/core/dist`; copy a
 * build to `packages/core/dist-<name>` so that its imports resolve. For each, the driver (`drive`, below) runs under
 * `valgrind --tool=callgrind` twice, with 3,000 and 7,000 generations after the same start, and the difference of the
 * two counts over 4,000 is printed: start-up and module loading cancel out, and most of the compiler's warm-up (at
 * 1,000 it is still going: 1,000 -> 3,000 counted about four times 3,000 -> 7,000). Node runs with `--single-threaded`
 * (the GC and the compiler on the main thread: counted, and in a fixed order). Needs valgrind (Debian: `valgrind`).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type * as Core from '@genservice/core';
import { USER_ID, VALID_BODY } from './lib/fixture.js';
import { inProcessService } from './lib/in-process.js';
import { postTenAtATime } from './lib/posts.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const FEW = 3000;
const MANY = 7000;

/** The work counted: `n` creates, ten at a time, then until every one completed (as create-profile.ts). */
async function drive(dist: string, n: number): Promise<void> {
  const core = (await import(pathToFileURL(path.join(dist, 'index.js')).href)) as typeof Core;
  const { service, ledger, post: req } = await inProcessService(core, Buffer.from(VALID_BODY));
  await postTenAtATime(service, req, n);
  while ((await ledger.account(USER_ID)).reserved > 0) await new Promise((r) => setImmediate(r));
  await service.stop();
}

/** Instructions callgrind counted for one run of the driver. */
function count(dist: string, n: number): Promise<number> {
  const args = ['--tool=callgrind', '--callgrind-out-file=/dev/null', process.execPath, '--single-threaded', '--import', 'tsx', path.join(here, 'instructions.ts'), 'drive', dist, String(n)];
  return new Promise((resolve, reject) => {
    const child = spawn('valgrind', args, { cwd: here, env: { ...process.env, NODE_ENV: 'production' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const m = /Collected : (\d+)/.exec(err);
      if (code !== 0 || !m) reject(new Error(`valgrind exited ${code}: ${err.slice(-500)}`));
      else resolve(Number(m[1]));
    });
  });
}

if (process.argv[2] === 'drive') {
  await drive(process.argv[3]!, Number(process.argv[4]));
} else {
  const dists = process.argv.length > 2 ? process.argv.slice(2) : [path.join(here, '../packages/core/dist')];
  for (const dist of dists) {
    // Both at once: counted instructions do not depend on what else runs.
    const [few, many] = await Promise.all([count(path.resolve(dist), FEW), count(path.resolve(dist), MANY)]);
    console.log(`${dist}: ${Math.round((many - few) / (MANY - FEW)).toLocaleString('en-US')} instructions per generation (${FEW}: ${few.toLocaleString('en-US')}, ${MANY}: ${many.toLocaleString('en-US')})`);
  }
}
