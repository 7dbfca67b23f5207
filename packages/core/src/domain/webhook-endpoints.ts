/**
 * Rules of registered webhook endpoints (`/v1/webhook-endpoints`), pure: what one may subscribe to, what it takes when
 * it says nothing, and when one that keeps failing is disabled. The use case, the outbox and the sender ask them here.
 */
import type { EndpointEventType } from '../ports/webhooks.js';
import { DEFAULT_WEBHOOK_EVENTS, WEBHOOK_EVENT_TYPES } from './types.js';

/** Every event a registered endpoint may list. */
export const ENDPOINT_EVENT_TYPES = [...WEBHOOK_EVENT_TYPES, 'webhook_endpoint.disabled'] as const satisfies readonly EndpointEventType[];

/** The events of an endpoint registered without `events`: a generation's, as a create's webhook, and a sibling's disabling. */
export const DEFAULT_ENDPOINT_EVENTS: readonly EndpointEventType[] = [...DEFAULT_WEBHOOK_EVENTS, 'webhook_endpoint.disabled'];

/**
 * Whether an endpoint that has failed every attempt since `failingSince` is disabled at `now`: once the failures
 * have lasted `periodMs`. A success in between starts the count again (the store forgets `failingSince`).
 */
export function failedTooLong(failingSince: number, now: number, periodMs: number): boolean {
  return now - failingSince >= periodMs;
}

/** An attempt counts as a success for the endpoint's health when the receiver answered 2xx. */
export function attemptSucceeded(status: number | undefined): boolean {
  return status !== undefined && status >= 200 && status < 300;
}
