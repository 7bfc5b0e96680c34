/* page.c -- see page.h. */
#include "page.h"

#include <string.h>

static const char html[] =
"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>mkv status</title>\n"
"<style>\n"
"body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\n"
"h1{font-size:20px;margin:0 0 .5em}\n"
"table{border-collapse:collapse;margin-top:1em}\n"
"th,td{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}\n"
"td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
"tr.up .state{color:#070}tr.down .state{color:#c00;font-weight:bold}\n"
"tr.down{background:#fee}\n"
".bar{display:inline-block;width:140px;height:10px;background:#eee;vertical-align:middle;margin-right:6px}\n"
".bar i{display:block;height:100%;background:#48c}\n"
"#summary span{margin-right:1.5em}\n"
"#updated{color:#888;font-size:12px}\n"
"</style></head><body>\n"
"<h1 id=\"title\">mkv</h1>\n"
"<div id=\"summary\"></div>\n"
"<table id=\"volumes\"><thead><tr><th id=\"rowname\">volume</th><th>state</th><th>disk</th>"
"<th>req/s</th><th>errors/s</th><th>errors</th><th>check</th></tr></thead><tbody></tbody></table>\n"
"<p id=\"updated\"></p>\n"
"<script>\n"
"'use strict';\n"
"function bytes(n){const u=['B','KiB','MiB','GiB','TiB','PiB'];let i=0;"
"while(n>=1024&&i<u.length-1){n/=1024;i++}return n.toFixed(i?1:0)+' '+u[i]}\n"
"function num(v,d){return v===undefined||v===null?'\\u2014':Number(v).toFixed(d)}\n"
"function cell(tr,text,cls){const td=document.createElement('td');td.textContent=text;"
"if(cls)td.className=cls;tr.appendChild(td);return td}\n"
"function item(label,value,id){const s=document.createElement('span');s.id=id;"
"s.textContent=label+': '+value;return s}\n"
"function draw(s){\n"
" document.getElementById('title').textContent='mkv '+s.role+' '+s.name;\n"
" document.title='mkv '+s.role+' '+s.name;\n"
" document.getElementById('rowname').textContent=s.role==='master'?'volume':'directory';\n"
" const sum=document.getElementById('summary');sum.replaceChildren();\n"
" sum.appendChild(item('requests/s',num(s.requests_per_s,1),'rps'));\n"
" sum.appendChild(item('errors/s',num(s.errors_per_s,1),'eps'));\n"
" sum.appendChild(item('p99',num(s.p99_ms,2)+' ms','p99'));\n"
" sum.appendChild(item('in flight',s.in_flight,'inflight'));\n"
" if(s.keys!==undefined)sum.appendChild(item('keys ('+s.keys_kind+')',s.keys,'keys'));\n"
" if(s.handoffs!==undefined)sum.appendChild(item('writes handed off since start',s.handoffs,'handoffs'));\n"
" if(s.tmp_files!==undefined)sum.appendChild(item('temporary files',s.tmp_files,'tmpfiles'));\n"
" const tb=document.querySelector('#volumes tbody');tb.replaceChildren();\n"
" for(const v of s.volumes){\n"
"  const tr=document.createElement('tr');tr.className=v.up?'up':'down';\n"
"  tr.dataset.volume=v.name;tr.dataset.state=v.up?'up':'down';\n"
"  cell(tr,v.name,'name');\n"
"  cell(tr,(v.misconfigured?'misconfigured: '+v.misconfigured.replace('_',' ')+', ':'')+(v.up?'up':'down')+(v.subvolumes>1?' ('+v.subvolumes_up+'/'+v.subvolumes+')':''),'state');\n"
"  if(v.misconfigured){tr.className='down';tr.dataset.state='misconfigured';}\n"
"  const d=cell(tr,'','disk');\n"
"  if(v.disk_total){const b=document.createElement('span');b.className='bar';"
"const f=document.createElement('i');f.style.width=(100*v.disk_used/v.disk_total).toFixed(1)+'%';"
"b.appendChild(f);d.appendChild(b);d.appendChild(document.createTextNode("
"bytes(v.disk_used)+' of '+bytes(v.disk_total)))}else d.textContent='\\u2014';\n"
"  cell(tr,num(v.requests_per_s,1),'n');cell(tr,num(v.errors_per_s,1),'n');\n"
"  cell(tr,v.errors===undefined?'\\u2014':v.errors,'n');\n"
"  cell(tr,v.check_ms===undefined?'\\u2014':num(v.check_ms,2)+' ms','n');\n"
"  tb.appendChild(tr);\n"
" }\n"
" document.getElementById('updated').textContent='updated '+new Date().toLocaleTimeString()+"
"', up '+s.uptime_s+' s';\n"
"}\n"
"async function tick(){try{const r=await fetch('status',{cache:'no-store'});draw(await r.json())}"
"catch(e){document.getElementById('updated').textContent='status unavailable: '+e}}\n"
"tick();setInterval(tick,2000);\n"
"</script></body></html>\n";

void page_html(struct buf *b)
{
	buf_append(b, html, sizeof(html) - 1);
}

double page_p99(struct page_p99 *p, const uint64_t hist[METRICS_NLE + 1])
{
	if (now_ms() - p->at_ms >= 1000) {
		uint64_t d[METRICS_NLE + 1];
		struct metrics_hist h = {metrics_le, METRICS_NLE, d, 0};
		for (int i = 0; i <= METRICS_NLE; i++)
			d[i] = hist[i] - p->prev[i];
		p->ms = metrics_quantile(&h, 0.99) * 1000;
		memcpy(p->prev, hist, sizeof(p->prev));
		p->at_ms = now_ms();
	}
	return p->ms;
}

double page_rate(struct page_rate *r, uint64_t total)
{
	uint64_t now = now_ms();
	if (!r->at_ms) {
		r->at_ms = now;
		r->last = total;
	} else if (now - r->at_ms >= 1000) {
		r->per_s = (double)(total - r->last) * 1000.0 / (double)(now - r->at_ms);
		r->at_ms = now;
		r->last = total;
	}
	return r->per_s;
}
