/**
 * Whether a port's answer must be awaited: any thenable, not only a native Promise (a host's store or resolver may hand
 * back another promise library's object, or a query builder that is awaitable), as `await` itself would treat it.
 */
export function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as PromiseLike<T>).then === 'function';
}
