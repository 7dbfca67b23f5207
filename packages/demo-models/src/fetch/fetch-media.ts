/** Limits and policy for fetching a model's media inputs. */
export interface FetchMediaOptions {
  /** Allow loopback, private, link-local and other non-public addresses. Default false. */
  allowPrivateNetworks?: boolean;
}

/** Placeholder until the safe fetcher lands; the models that use it are not registered yet. */
export function fetchMedia(_url: string, _options: FetchMediaOptions & { signal?: AbortSignal }): Promise<{ bytes: Uint8Array; mimeType: string; finalUrl: string }> {
  return Promise.reject(new Error('fetchMedia is not implemented yet'));
}
