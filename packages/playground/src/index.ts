/**
 * @module @genservice/playground
 *
 * The playground page: a browser page that lists a service's models, renders each model's settings descriptors as a
 * form, shows the price and balance, starts a generation, follows its status live and shows the result (image,
 * video, audio, an interactive 3D view, text), with the caller's history. It talks to the API only through the public
 * HTTP endpoints, on the same origin by default.
 *
 * A host does not import this package itself: it installs it and creates the service with `playground: true`; core
 * then serves these files at `<mount>/playground/`. The files are plain static assets (HTML, CSS, ES modules) that
 * ship in the package's `assets` folder; nothing is fetched from the internet at run time.
 *
 * @example
 * // npm i @genservice/playground
 * const service = createGenerationService({ providers: [...], playground: true });
 * // open http://localhost:3000/api/playground/ and paste an API key
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** One file of the page, as core serves it. */
export interface PlaygroundAsset {
  /** `Content-Type` header value. */
  contentType: string;
  body: Uint8Array;
}

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json; charset=utf-8',
};

/** The folder the page's files ship in (next to `src` and `dist`, so both the source and the build find it). */
export const PLAYGROUND_ASSET_DIR: string = fileURLToPath(new URL('../assets/', import.meta.url));

let files: Map<string, PlaygroundAsset> | undefined;

/** Reads the asset folder once: a fixed table of names, so a request can only ever name one of these files. */
function load(): Map<string, PlaygroundAsset> {
  const table = new Map<string, PlaygroundAsset>();
  for (const name of readdirSync(PLAYGROUND_ASSET_DIR)) {
    const contentType = CONTENT_TYPES[extname(name)];
    if (!contentType) continue;
    table.set(`/${name}`, { contentType, body: new Uint8Array(readFileSync(join(PLAYGROUND_ASSET_DIR, name))) });
  }
  const index = table.get('/index.html');
  if (!index) throw new Error(`@genservice/playground: ${PLAYGROUND_ASSET_DIR} has no index.html (a broken install?)`);
  table.set('/', index);
  return table;
}

/** The names the page is served under (`/` is `index.html`), for a host that wants to list or pre-render them. */
export function playgroundAssetPaths(): string[] {
  files ??= load();
  return [...files.keys()];
}

/**
 * One file of the page by its path below `<mount>/playground` (`/`, `/app.js`, ...), or `null` for anything else.
 * The lookup is an exact match in the table of shipped files: `..`, encoded slashes, queries and directory names
 * never reach the file system.
 */
export function readPlaygroundAsset(path: string): PlaygroundAsset | null {
  files ??= load();
  return files.get(path) ?? null;
}

/** The console's files ship in `assets/console/`, beside the playground's. */
export const CONSOLE_ASSET_DIR: string = fileURLToPath(new URL('../assets/console/', import.meta.url));

let consoleFiles: Map<string, PlaygroundAsset> | undefined;

/**
 * The console's table: its own files, `/` (the operator console, `index.html`), `/me` (the user's page, `me.html`)
 * and `/chart.js`, Chart.js 4's UMD build read from the chart.js package this package depends on (served by the
 * service itself: the page loads nothing from any other origin).
 */
function loadConsole(): Map<string, PlaygroundAsset> {
  const table = new Map<string, PlaygroundAsset>();
  for (const name of readdirSync(CONSOLE_ASSET_DIR)) {
    const contentType = CONTENT_TYPES[extname(name)];
    if (!contentType) continue;
    table.set(`/${name}`, { contentType, body: new Uint8Array(readFileSync(join(CONSOLE_ASSET_DIR, name))) });
  }
  const index = table.get('/index.html');
  const me = table.get('/me.html');
  if (!index || !me) throw new Error(`@genservice/playground: ${CONSOLE_ASSET_DIR} has no index.html or me.html (a broken install?)`);
  table.set('/', index);
  table.set('/me', me);
  // `chart.js` resolves to its CommonJS build in dist/ (the package exports no other path); the UMD build is beside it.
  const chartDir = dirname(createRequire(import.meta.url).resolve('chart.js'));
  table.set('/chart.js', { contentType: CONTENT_TYPES['.js']!, body: new Uint8Array(readFileSync(join(chartDir, 'chart.umd.min.js'))) });
  return table;
}

/** The names the console is served under (`/` is the operator console, `/me` the user's page). */
export function consoleAssetPaths(): string[] {
  consoleFiles ??= loadConsole();
  return [...consoleFiles.keys()];
}

/**
 * One file of the console by its path below `<mount>/console` (`/`, `/me`, `/console.js`, ...), or `null`: an exact
 * match in the table of shipped files, as `readPlaygroundAsset`.
 */
export function readConsoleAsset(path: string): PlaygroundAsset | null {
  consoleFiles ??= loadConsole();
  return consoleFiles.get(path) ?? null;
}
