import { inject, injectable } from 'tsyringe';
import type { ErrorDetail } from '../domain/errors.js';
import { FileUrlSigner, fileReferenceRefusal } from '../domain/file-urls.js';
import type { BaseUrl, SettingDescriptor, Settings } from '../domain/types.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import { MEDIA_FIELD_TYPES } from '../settings/compile.js';
import { TOKENS } from '../tokens.js';
import { Views } from './views.js';

const MEDIA = new Set<string>(MEDIA_FIELD_TYPES);
/** The answer for settings without a media field: shared, never written to. */
const NONE: readonly ErrorDetail[] = Object.freeze([]);

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

  /** The media settings of each model's descriptors, found once (issue 36: a model without one reads nothing per create). */
  private readonly mediaOf = new WeakMap<readonly SettingDescriptor[], readonly SettingDescriptor[]>();

  /** One detail (`settings.images.0`, `invalid_url`) per media URL of `settings` that `userId` may not give. */
  refusals(descriptors: readonly SettingDescriptor[], settings: Settings, userId: string, baseUrl?: BaseUrl): readonly ErrorDetail[] {
    let media = this.mediaOf.get(descriptors);
    if (media === undefined) {
      media = descriptors.filter((d) => MEDIA.has(d.fieldType));
      this.mediaOf.set(descriptors, media);
    }
    if (media.length === 0) return NONE;
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
    for (const d of media) {
      const value = settings[d.name];
      if (!Array.isArray(value)) continue;
      value.forEach((url, i) => {
        const why = typeof url === 'string' ? fileReferenceRefusal(url, userId, this.signer, now, ownBase) : undefined;
        if (why !== undefined) details.push({ field: `settings.${d.name}.${i}`, code: 'invalid_url', message: why });
      });
    }
    return details;
  }
}
