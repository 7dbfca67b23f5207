import { inject, injectable } from 'tsyringe';
import { asError, childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { fail } from './respond.js';
import type { HttpResponse } from './types.js';

type Asset = { contentType: string; body: Uint8Array } | null;

/** What @genservice/playground exports (an optional dependency, imported on the first page request). */
interface PlaygroundAssets {
  readPlaygroundAsset(path: string): Asset;
  /** The console's files (`/`, `/me`, ...); absent in a version of the package without the console. */
  readConsoleAsset?(path: string): Asset;
}

/**
 * The pages of @genservice/playground, loaded on first use: the playground (`playground: true`) at
 * `<mount>/playground/`, and the operator console (`console: true`) at `<mount>/console/` with the user's page at
 * `<mount>/console/me`.
 */
@injectable()
export class PlaygroundRoute {
  private assets: Promise<PlaygroundAssets | null> | undefined;
  private readonly logger: Logger;

  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(TOKENS.Logger) logger: Logger,
  ) {
    this.logger = childLogger(logger, { component: 'http' });
  }

  serve(asset: string, query: string): Promise<HttpResponse> {
    return this.page('playground', this.options.playground, (a) => a.readPlaygroundAsset.bind(a), asset, query, this.playgroundPolicy());
  }

  serveConsole(asset: string, query: string): Promise<HttpResponse> {
    return this.page('console', this.options.console, (a) => a.readConsoleAsset?.bind(a), asset, query, this.consolePolicy());
  }

  private async page(
    name: string,
    enabled: boolean,
    reader: (assets: PlaygroundAssets) => ((path: string) => Asset) | undefined,
    asset: string,
    query: string,
    policy: string,
  ): Promise<HttpResponse> {
    if (!enabled) return fail('not_found', 'No such endpoint.');
    const assets = await this.load();
    const read = assets ? reader(assets) : undefined;
    if (!read) return fail('not_found', `The ${name} is not installed.`);
    // The page lives at `<mount>/<name>/`: its files and the API (`../v1/...`) are addressed relative to it, so it
    // works under any mount point and behind any proxy prefix. A relative Location keeps both (RFC 9110 10.2.2).
    if (asset === '') {
      return { status: 308, headers: { location: `${name}/${query ? `?${query}` : ''}`, 'content-length': '0', 'cache-control': 'no-cache' }, body: '' };
    }
    const file = read(asset);
    if (!file) return fail('not_found', 'No such file.');
    return {
      status: 200,
      headers: {
        'content-type': file.contentType,
        'content-length': String(file.body.byteLength),
        'cache-control': 'no-cache',
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
        'content-security-policy': policy,
      },
      body: file.body,
    };
  }

  private load(): Promise<PlaygroundAssets | null> {
    // A specifier in a variable: the package is optional, so neither the compiler nor a bundler may require it.
    const specifier = '@genservice/playground';
    this.assets ??= import(specifier).then(
      (m: Partial<PlaygroundAssets>) => {
        if (typeof m.readPlaygroundAsset === 'function') return m as PlaygroundAssets;
        this.logger.error({}, '@genservice/playground is installed but has no readPlaygroundAsset: the page is not served');
        return null;
      },
      (err: unknown) => {
        this.logger.error({ err: asError(err) }, 'playground: true (or console: true) needs the @genservice/playground package installed');
        return null;
      },
    );
    return this.assets;
  }

  /** The service's own public origin besides 'self', when it has one. */
  private publicOrigin(): string {
    return this.options.publicUrl ? ` ${new URL(this.options.publicUrl).origin}` : '';
  }

  /**
   * Scripts and styles only from the page's own files; results may be on the API's public URL. The page holds the
   * caller's key, so it may connect to its own origin (and the publicUrl's) and to no other.
   */
  private playgroundPolicy(): string {
    return [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      "img-src 'self' data: blob: http: https:",
      "media-src 'self' blob: http: https:",
      `connect-src 'self'${this.publicOrigin()}`,
      "object-src 'none'",
      "base-uri 'none'",
      "frame-ancestors 'self'",
      "form-action 'self'",
    ].join('; ');
  }

  /**
   * The console holds an admin key: nothing but its own origin (and the publicUrl's, where result files are served)
   * for anything, results included.
   */
  private consolePolicy(): string {
    const own = `'self'${this.publicOrigin()}`;
    return [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      `img-src ${own} data: blob:`,
      `media-src ${own} blob:`,
      `connect-src ${own}`,
      "object-src 'none'",
      "base-uri 'none'",
      "frame-ancestors 'none'",
      "form-action 'none'",
    ].join('; ');
  }
}
