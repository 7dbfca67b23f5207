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
import { extname, join } from 'node:path';
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
