import { checkOutboundUrl, guardedRequest, OutboundError } from '../outbound/index.js';
import type { ResolvedServiceOptions } from '../resolved-options.js';
import type { WebhookRequest, WebhookResponse, WebhookTransport, WebhookUrlCheck } from './webhook-messages.js';

/** At most this much of a receiver's answer is read: it is only looked at for its status. */
const ANSWER_BYTES = 64 * 1024;

/**
 * Webhook POSTs through the outbound guard: the receiver's address checked (again: DNS may have changed since create)
 * and pinned, https only unless allowed, redirects not followed (a 3xx is a failed attempt), bounded time and answer.
 */
export function defaultWebhookTransport(settings: ResolvedServiceOptions['webhooks']): WebhookTransport {
  return async (request: WebhookRequest): Promise<WebhookResponse> => {
    try {
      const res = await guardedRequest(request.url, {
        method: 'POST',
        headers: request.headers,
        body: request.body,
        timeoutMs: request.timeoutMs,
        maxRedirects: 0,
        maxBytes: ANSWER_BYTES,
        truncate: true,
        httpsOnly: !settings.allowHttp,
        allowPrivateNetworks: settings.allowPrivateUrls,
      });
      const retryAfter = res.headers['retry-after'];
      return { status: res.status, ...(typeof retryAfter === 'string' ? { retryAfter } : {}) };
    } catch (err) {
      // The owner reads this in the deliveries list: the guard's sentence names the URL without query or credentials.
      return { error: err instanceof OutboundError ? err.message : 'the request failed' };
    }
  };
}

/** The create-time check of a webhook URL: what a delivery would refuse, refused now. */
export function defaultWebhookUrlCheck(settings: ResolvedServiceOptions['webhooks']): WebhookUrlCheck {
  return async (url: string): Promise<void> => {
    if (url.length > 2048) throw new Error('the URL is longer than 2048 characters');
    try {
      await checkOutboundUrl(url, { httpsOnly: !settings.allowHttp, allowPrivateNetworks: settings.allowPrivateUrls });
    } catch (err) {
      throw new Error(err instanceof OutboundError ? err.message : 'the URL cannot be used');
    }
  };
}
