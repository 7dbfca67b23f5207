// One guard for every outbound HTTP request genservice makes: media inputs, provider result URLs, webhook deliveries.
export {
  checkOutboundUrl,
  fetchMedia,
  guardedRequest,
  FETCH_DEFAULTS,
  MediaFetchError,
  OutboundError,
  type FetchedMedia,
  type FetchMediaOptions,
  type GuardedRequestOptions,
  type GuardedResponse,
  type MediaFetchErrorCode,
  type OutboundCheckOptions,
  type OutboundErrorCode,
  type ResolvedAddress,
} from './guard.js';
export { blockedAddressReason } from './ip.js';
