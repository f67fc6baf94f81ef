#!/usr/bin/env python3
# Histograms of Inlet's /metrics between two scrapes (scripts/tail-profile.sh): count, mean,
# the bucket bounds of p50/p90/p99, and the buckets.
#   scripts/tail-hist.py BEFORE.txt AFTER.txt
import re,sys
def load(f):
    d={}
    for line in open(f):
        if line.startswith('#'): continue
        m=re.match(r'^(\S+?)(\{[^}]*\})?\s+(\S+)$',line.strip())
        if m: d[(m.group(1),m.group(2) or '')]=float(m.group(3))
    return d
a,b=load(sys.argv[1]),load(sys.argv[2])
def hist(name,lab=''):
    bk=[]
    for (n,l),v in b.items():
        if n==name+'_bucket' and (lab in l):
            le=re.search(r'le="([^"]+)"',l).group(1)
            bk.append((float('inf') if le=='+Inf' else float(le), v-a.get((n,l),0)))
    bk.sort()
    cnt=[v for (n,l),v in b.items() if n==name+'_count' and lab in l][0]-[v for (n,l),v in a.items() if n==name+'_count' and lab in l][0]
    s=[v for (n,l),v in b.items() if n==name+'_sum' and lab in l][0]-[v for (n,l),v in a.items() if n==name+'_sum' and lab in l][0]
    def q(p):
        t=p*cnt; prev=0
        for le,c in bk:
            if c>=t: return le
        return None
    print(f"{name}{lab}: count {cnt:.0f} mean {s/cnt*1e3:.3f} ms; p50 <= {q(.5)*1e3:g} ms, p90 <= {q(.9)*1e3:g} ms, p99 <= {q(.99)*1e3:g} ms; buckets " + ", ".join(f"<={le*1e3:g}ms:{c:.0f}" for le,c in bk))
hist('inlet_request_duration_seconds','api="Produce"')
hist('inlet_request_duration_seconds','api="Fetch"')
hist('inlet_group_commit_duration_seconds')
hist('inlet_fsync_duration_seconds')
