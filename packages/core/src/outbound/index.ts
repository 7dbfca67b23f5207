// The outbound-HTTP guard (media inputs, webhooks, provider result URLs) moves here; see issue 11.
export {};
