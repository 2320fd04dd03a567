import { pino, type Logger } from 'pino';

/** JSON logs on stderr; anything that could carry a credential is redacted by path. */
export function createLogger(level = 'info'): Logger {
  return pino(
    {
      name: 'machinemodel-operator',
      level,
      redact: {
        paths: ['apiKey', '*.apiKey', 'token', '*.token', 'headers.authorization', '*.headers.authorization'],
        censor: '[redacted]',
      },
    },
    pino.destination(2),
  );
}
