import { inject, injectable } from 'tsyringe';
import { asError, childLogger } from '../logger.js';
import type { Logger } from '../ports/logger.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { TOKENS } from '../tokens.js';
import { fail } from './respond.js';
import type { HttpResponse } from './types.js';

/** What @genservice/playground exports (an optional dependency, imported on the first playground request). */
interface PlaygroundAssets {
  readPlaygroundAsset(path: string): { contentType: string; body: Uint8Array } | null;
}

/** The playground page (`playground: true`): static assets of @genservice/playground, loaded on first use. */
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

  async serve(asset: string, query: string): Promise<HttpResponse> {
    if (!this.options.playground) return fail('not_found', 'No such endpoint.');
    const assets = await this.load();
    if (!assets) return fail('not_found', 'The playground is not installed.');
    // The page lives at `<mount>/playground/`: its files and the API (`../v1/...`) are addressed relative to it, so it
    // works under any mount point and behind any proxy prefix. A relative Location keeps both (RFC 9110 10.2.2).
    if (asset === '') {
      return { status: 308, headers: { location: `playground/${query ? `?${query}` : ''}`, 'content-length': '0', 'cache-control': 'no-cache' }, body: '' };
    }
    const file = assets.readPlaygroundAsset(asset);
    if (!file) return fail('not_found', 'No such file.');
    return {
      status: 200,
      headers: {
        'content-type': file.contentType,
        'content-length': String(file.body.byteLength),
        'cache-control': 'no-cache',
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
        'content-security-policy': this.contentSecurityPolicy(),
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
        this.logger.error({ err: asError(err) }, 'playground: true needs the @genservice/playground package installed');
        return null;
      },
    );
    return this.assets;
  }

  /**
   * Scripts and styles only from the page's own files; results may be on the API's public URL. The page holds the
   * caller's key, so it may connect to its own origin (and the publicUrl's) and to no other.
   */
  private contentSecurityPolicy(): string {
    return [
      "default-src 'self'",
      "script-src 'self'",
      "style-src 'self'",
      "img-src 'self' data: blob: http: https:",
      "media-src 'self' blob: http: https:",
      `connect-src 'self'${this.options.publicUrl ? ` ${new URL(this.options.publicUrl).origin}` : ''}`,
      "object-src 'none'",
      "base-uri 'none'",
      "frame-ancestors 'self'",
      "form-action 'self'",
    ].join('; ');
  }
}
