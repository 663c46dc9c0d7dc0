// Headless Debian Chromium for the pages' tests, driven by playwright-core (no browser download).
// Without Chromium the browser tests are skipped on a developer's machine, but never under CI
// (CI=true), where .ci/run installs it: there a missing browser fails the run.
import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';

/** Screenshots for a person to look at: $TUNER_SCREENSHOT_DIR, or a temp directory. */
export const SCREENSHOTS = process.env['TUNER_SCREENSHOT_DIR'] ?? join(tmpdir(), 'tuner-web-screenshots');

export const skipWithoutChromium: string | false = existsSync(CHROMIUM) || process.env['CI'] ? false : `Chromium is not installed at ${CHROMIUM} (apt-get install -y chromium)`;

export async function launchChromium(): Promise<Browser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  // The background-networking flags keep Chromium from calling out: this machine has no network.
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}
