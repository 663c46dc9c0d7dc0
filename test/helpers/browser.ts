// Headless Debian Chromium for the pages' tests, driven by playwright-core (no browser download).
// Without Chromium the browser tests are skipped on a developer's machine, but never under CI
// (CI=true), where .ci/run installs it: there a missing browser fails the run.
import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startAdminService, type AdminService, type AdminServiceOptions } from './service-admin.ts';
import { ADMIN_PASSWORD, type StorageKind } from './service.ts';

const CHROMIUM = '/usr/bin/chromium';

/** Screenshots for a person to look at: $TUNER_SCREENSHOT_DIR, or a temp directory. */
export const SCREENSHOTS = process.env['TUNER_SCREENSHOT_DIR'] ?? join(tmpdir(), 'tuner-web-screenshots');

export const skipWithoutChromium: string | false =
  existsSync(CHROMIUM) || process.env['CI'] ? false : `Chromium is not installed at ${CHROMIUM} (apt-get install -y chromium)`;

export async function launchChromium(): Promise<Browser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  // The background-networking flags keep Chromium from calling out: this machine has no network.
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/**
 * A page that collects what should never happen: a script error or a Content-Security-Policy
 * violation (both show up on the console), and a dialog unless `dialogs: 'accept'` (pages whose
 * buttons ask first). `expectedStatuses` are the 4xx answers the test provokes on purpose, which
 * the browser logs too.
 */
export async function openWatchedPage(
  browser: Browser,
  options: { expectedStatuses: readonly number[]; dialogs?: 'accept' | 'problem' },
): Promise<{ page: Page; problems: string[] }> {
  const problems: string[] = [];
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const expected = new RegExp(`^Failed to load resource: the server responded with a status of (${options.expectedStatuses.join('|')})`);
  page.on('console', (message) => {
    if (message.type() === 'error' && !expected.test(message.text())) problems.push(message.text());
  });
  page.on('pageerror', (error) => problems.push(error.message));
  page.on('dialog', (dialog) => {
    if (options.dialogs === 'accept') return void dialog.accept();
    problems.push(`unexpected dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return { page, problems };
}

/** Logs a person (the admin unless told) in with the login form and waits for the dashboard. */
export async function logInOnPage(page: Page, serviceUrl: string, who = { username: 'admin', password: ADMIN_PASSWORD }): Promise<void> {
  await page.goto(`${serviceUrl}/login`);
  await page.fill('input[name=username]', who.username);
  await page.fill('input[name=password]', who.password);
  await page.click('button[type=submit]');
  await page.waitForURL(`${serviceUrl}/`);
}

/** The admin service and a watched page in Chromium for one test file (dashboardInChromium). */
export interface DashboardLab {
  lab: AdminService;
  browser: Browser;
  page: Page;
  problems: string[];
}

/**
 * Starts the admin service (`storage`, `service` options) and a watched page (openWatchedPage's
 * `page` options) before the file's tests, and closes both after them. The fields are there once
 * the tests run; nothing starts when Chromium is missing (the tests are skipped).
 */
export function dashboardInChromium(options: {
  storage?: StorageKind;
  service?: AdminServiceOptions;
  page: Parameters<typeof openWatchedPage>[1];
}): DashboardLab {
  const web = {} as DashboardLab;
  before(async () => {
    if (skipWithoutChromium) return;
    web.lab = await startAdminService(options.storage, options.service);
    web.browser = await launchChromium();
    Object.assign(web, await openWatchedPage(web.browser, options.page));
  });
  after(async () => {
    await web.browser?.close();
    await web.lab?.close();
  });
  return web;
}
