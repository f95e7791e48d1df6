/**
 * The Weft web app: a header with the pages (hash routes #/playground,
 * #/readers, #/documents, #/metrics), an API settings dialog and the pages themselves,
 * each built once and shown/hidden on navigation so a running generation or
 * a loaded in-tab model survives switching pages.
 */
import './style.css';
import { defaults, resetSettings, resolveBase, savedSettings, saveSettings } from './api.ts';
import { field, h } from './dom.ts';
import { documentsPage } from './pages/documents.ts';
import { metricsPage } from './pages/metrics.ts';
import type { Page } from './pages/page.ts';
import { playgroundPage } from './pages/playground.ts';
import { readersPage } from './pages/readers.ts';

interface Route {
  path: string;
  title: string;
  make: () => Page;
  page?: Page;
  link?: HTMLAnchorElement;
}

const routes: Route[] = [
  { path: 'playground', title: 'Playground', make: playgroundPage },
  { path: 'readers', title: 'Readers', make: readersPage },
  { path: 'documents', title: 'Documents', make: documentsPage },
  { path: 'metrics', title: 'Metrics', make: metricsPage },
];

function settingsDialog(): HTMLDialogElement {
  const s = savedSettings();
  const d = defaults();
  // Empty = the server's default (shown as the placeholder), so a changed server config still applies.
  const inf = h('input#set-inference', { value: s.inference ?? '', placeholder: `${d.inference} (server default)` });
  const mgmt = h('input#set-management', { value: s.management ?? '', placeholder: `${d.management} (server default)` });
  const key = h('input#set-key', { type: 'password', value: s.apiKey ?? '', autocomplete: 'off' });
  const mkey = h('input#set-mkey', { type: 'password', value: s.managementKey ?? '', autocomplete: 'off', placeholder: 'same as the API key' });
  const resolved = h('p.small.muted');
  const show = (): void => {
    const r = (v: string, dflt: string): string => {
      try {
        return resolveBase(v || dflt);
      } catch {
        return 'invalid URL';
      }
    };
    resolved.textContent = `Inference → ${r(inf.value, d.inference)} · Management → ${r(mgmt.value, d.management)}`;
  };
  const dlg = h(
    'dialog#settings',
    h(
      'form',
      { method: 'dialog' },
      h('h2', 'API settings'),
      h('p.small.muted', 'Relative URLs resolve against this page; ":3001" means this host on port 3001.'),
      field('Inference API base', inf),
      field('Management API base', mgmt),
      field('API key (Bearer)', key),
      field('Management API key', mkey),
      resolved,
      h(
        'div.row',
        h('button.primary', { value: 'save' }, 'Save'),
        h('button', { value: 'reset', type: 'submit' }, 'Reset to defaults'),
        h('button', { value: 'cancel', formnovalidate: true }, 'Cancel'),
      ),
    ),
  );
  dlg.addEventListener('input', show);
  dlg.addEventListener('close', () => {
    if (dlg.returnValue === 'save') saveSettings({ inference: inf.value.trim(), management: mgmt.value.trim(), apiKey: key.value, managementKey: mkey.value });
    else if (dlg.returnValue === 'reset') resetSettings();
    else return;
    location.reload();
  });
  show();
  return dlg;
}

function boot(): void {
  const root = document.getElementById('app')!;
  const main = h('main');
  const nav = h('nav');
  for (const r of routes) nav.append((r.link = h('a', { href: `#/${r.path}` }, r.title)));
  const dlg = settingsDialog();
  const gear = h('button.link#open-settings', { type: 'button', title: 'API settings', onclick: () => dlg.showModal() }, 'Settings');
  root.append(h('header', h('a.brand', { href: '#/playground' }, h('span.logo', '◆'), 'Weft'), nav, gear), main, dlg);

  let current: Route | undefined;
  const route = (): void => {
    const path = location.hash.replace(/^#\/?/, '').split(/[/?]/)[0] ?? '';
    const next = routes.find((r) => r.path === path) ?? routes[0]!;
    if (!routes.some((r) => r.path === path)) history.replaceState(null, '', `#/${next.path}`);
    if (next === current) return;
    current?.page?.hide?.();
    if (current?.page) current.page.el.hidden = true;
    if (!next.page) main.append((next.page = next.make()).el);
    next.page.el.hidden = false;
    next.page.show?.();
    for (const r of routes) r.link?.classList.toggle('active', r === next);
    document.title = `${next.title} · Weft`;
    current = next;
  };
  addEventListener('hashchange', route);
  route();
}

boot();
