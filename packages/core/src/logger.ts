import type { Logger } from './ports/logger.js';

const noop = (): void => {};

/** A logger that drops everything (the default). */
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop, child: () => silentLogger };

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const LEVELS: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/**
 * A small JSON-lines logger (one object per line), for hosts without pino.
 * @example const logger = createJsonLogger({ level: 'info' });
 */
export function createJsonLogger(
  options: { level?: LogLevel; write?: (line: string) => void; bindings?: Record<string, unknown> } = {},
): Logger {
  const min = LEVELS[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stdout.write(line + '\n'));
  const bindings = options.bindings ?? {};
  const at =
    (level: LogLevel) =>
    (obj: Record<string, unknown>, msg?: string): void => {
      if (LEVELS[level] < min) return;
      write(JSON.stringify({ time: new Date().toISOString(), level, ...bindings, ...obj, ...(msg ? { msg } : {}) }));
    };
  return {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: (more) => createJsonLogger({ ...options, bindings: { ...bindings, ...more } }),
  };
}

export function childLogger(logger: Logger, bindings: Record<string, unknown>): Logger {
  return logger.child ? logger.child(bindings) : logger;
}
