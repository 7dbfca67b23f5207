import { inject, injectable } from 'tsyringe';
import type { ErrorDetail } from '../domain/errors.js';
import { FileUrlSigner, fileReferenceRefusal } from '../domain/file-urls.js';
import type { BaseUrl, SettingDescriptor, Settings } from '../domain/types.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { MEDIA_FIELD_TYPES } from '../settings/compile.js';
import { TOKENS } from '../tokens.js';
import { Views } from './views.js';

const MEDIA = new Set<string>(MEDIA_FIELD_TYPES);

/**
 * The service's own file links given as media settings (`image`, `audio`, ...): a create takes the caller's own
 * uploads and generation files, unexpired, and nobody else's (`fileReferenceRefusal` is the rule). Links elsewhere
 * are left to the outbound guard, which checks them when a model fetches them.
 */
@injectable()
export class FileReferences {
  constructor(
    @inject(TOKENS.Options) private readonly options: ResolvedServiceOptions,
    @inject(FileUrlSigner) private readonly signer: FileUrlSigner,
    @inject(Views) private readonly views: Views,
  ) {}

  /** One detail (`settings.images.0`, `invalid_url`) per media URL of `settings` that `userId` may not give. */
  refusals(descriptors: readonly SettingDescriptor[], settings: Settings, userId: string, baseUrl?: BaseUrl): ErrorDetail[] {
    const details: ErrorDetail[] = [];
    // Read once, and only for a link of a file URL's shape: the request's own base is not read on other creates.
    let base: { value: string | undefined } | undefined;
    const ownBase = (): string | undefined => {
      if (base === undefined) {
        try {
          base = { value: this.views.fileBase(baseUrl) };
        } catch {
          // No file base (no publicUrl, no trusted request host): only links this service signed are recognised.
          base = { value: undefined };
        }
      }
      return base.value;
    };
    const now = this.options.clock.now();
    for (const d of descriptors) {
      const value = settings[d.name];
      if (!MEDIA.has(d.fieldType) || !Array.isArray(value)) continue;
      value.forEach((url, i) => {
        const why = typeof url === 'string' ? fileReferenceRefusal(url, userId, this.signer, now, ownBase) : undefined;
        if (why !== undefined) details.push({ field: `settings.${d.name}.${i}`, code: 'invalid_url', message: why });
      });
    }
    return details;
  }
}
