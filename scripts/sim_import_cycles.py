#!/usr/bin/env python3
"""File-level import graph of crates/flscale/src/sim (non-test code): prints every cycle and the
file and edge counts (issue 16: no import circle inside sim/). Usage: python3 scripts/sim_import_cycles.py"""
import os,re,sys
root=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'crates', 'flscale', 'src', 'sim')
files={}
for d,_,fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p=os.path.join(d,f); rel=os.path.relpath(p,root)
            mod=rel[:-3].split('/')
            if mod[-1]=='mod': mod=mod[:-1]
            files[tuple(mod)]=p
def resolve(parts):
    for k in range(len(parts),-1,-1):
        if tuple(parts[:k]) in files: return tuple(parts[:k])
edges=set()
for mod,p in files.items():
    if mod and mod[0]=='tests': continue
    s=open(p).read()
    s=s.split('#[cfg(test)]')[0]
    s=re.sub(r'//[^\n]*','',s)
    here=list(mod) if not p.endswith('mod.rs') else list(mod)
    for m in re.finditer(r'crate::sim::([A-Za-z_:{}, \n]+)',s):
        txt=m.group(1)
        base=txt.split('{')[0]
        parts=[x for x in base.split('::') if x.strip()]
        parts=[x.strip() for x in parts if re.fullmatch(r'\s*[a-z_0-9]+\s*',x)]
        if '{' in txt:
            inner=txt.split('{',1)[1].split('}')[0]
            for it in inner.split(','):
                it=it.strip().split('::')[0]
                if re.fullmatch(r'[a-z_0-9]+',it) and it!='self':
                    t=resolve(parts+[it])
                    if t is not None and t!=mod: edges.add((mod,t))
        t=resolve(parts)
        if t is not None and t!=mod: edges.add((mod,t))
    for m in re.finditer(r'\bsuper::([a-z_0-9:]+)',s):
        parent=list(mod[:-1]) if not p.endswith('mod.rs') else list(mod[:-1])
        parts=parent+[x for x in m.group(1).split('::') if x]
        t=resolve(parts)
        if t is not None and t!=mod: edges.add((mod,t))
# drop edges to mod.rs-only re-export files? keep but exclude edges into ancestors (mod.rs declares)
edges={(a,b) for a,b in edges if not (len(b)<len(a) and a[:len(b)]==b)}
g={}
for a,b in edges: g.setdefault(a,set()).add(b)
cyc=[]
color={}
def dfs(u,stack):
    color[u]=1; stack.append(u)
    for v in g.get(u,()):
        if color.get(v)==1: cyc.append(stack[stack.index(v):]+[v])
        elif not color.get(v): dfs(v,stack)
    stack.pop(); color[u]=2
for u in list(files):
    if not color.get(u): dfs(u,[])
print(len(files),'files',len(edges),'edges')
for c in cyc: print('CYCLE',' -> '.join('/'.join(x) or 'sim' for x in c))
sys.exit(1 if cyc else 0)
