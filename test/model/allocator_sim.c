/*
 * allocator_sim.c -- a randomized model checker for distseq's window
 * allocator and its membership changes (src/agent.c, src/member.c,
 * src/catalog.c; DESIGN-NOTES.md sections 2 and 3).
 *
 * Every agent and every membership change is a state machine that sends one
 * message per step; between any two steps anything else may happen: other
 * agents, other changes, node crashes and recoveries, partitions of random
 * subsets, single links cut or healed, a reply lost after the callee applied
 * the call, a request held in the network and applied much later (a call
 * that timed out but that the server still runs), an agent or a proposer
 * dying half way, a removed machine wiped and coming back as a fresh node.
 * It checks that no two windows ever created overlap and that no node's
 * high-water mark ever goes down, and prints the trace that led to the first
 * violation.  One sequence is modelled; it is created on the seed node.
 *
 * Protocols (--proto):
 *   impl   what the code does today (default; member.c and agent.c as of
 *          11659f2).  Members are only ever added, one at a time
 *          (distseq_remove_peer refuses to remove a member): --changes is
 *          "add" unless given.  The voters are the members before, remote
 *          ones first; the proposer's own move stays uncommitted, its node
 *          row locked, until after the adopt; a failed step, the adopt
 *          included, reverts every remote voter tried and rolls the
 *          proposer's move back.  The epoch compare-and-set returns the marks
 *          of the sequences the voter has (so does the proposer for its own);
 *          the adopt takes only a fresh node, raises the sequences it has to
 *          the largest mark and keeps it as the seed of every sequence it has
 *          not (distseq_seed).  A member lacking the sequence answers an
 *          agent's read with its seed (none: no mark) and counts towards the
 *          read majority; introduced, the sequence starts at the larger of
 *          the mark read and the seed.  A node whose membership has one
 *          member allocates inline (catalog.c), under the node row's lock.
 *          --changes=both (or add,remove) brings back the remove of a7f2bcb
 *          (the same steps, seeding nobody), to show what it breaks.
 *   brief  the protocol as the model's brief states it: every node holds a
 *          mark, the joiner is always seeded, the proposer's move is atomic
 *          and an adopt that fails leaves the change made.
 *   fixed  impl with every fix below (--fix=... applies some of them to impl
 *          or, for quorum, to brief):
 *     quorum   removing one of two members needs the vote of the one removed
 *              (it moves to the new epoch, out of its own membership, and a
 *              node out of its own membership neither allocates, inline or
 *              not, nor proposes);
 *     seed     voters take the new epoch "pending": no compare-and-set wins on
 *              them and they cannot vote again; the proposer, last voter,
 *              raises its own mark to the largest mark returned as it moves
 *              (the commit), then seeds every member of the new set with it
 *              (the joiner through the adopt); a pending member can be seeded
 *              later by any seeded member of its epoch;
 *     missing  a seed is kept for a sequence the member does not have yet, and
 *              introducing the sequence there starts from it;
 *     resume   (liveness only) a dead proposer resumes when its node is back:
 *              it reverts every voter, or finishes seeding if it had moved;
 *              a node in the epoch of a change asks the proposer how it ended
 *              (committed: seeded; failed: back to the epoch before); a
 *              joiner whose adopt failed adopts later from a member.
 *
 * --broken=X takes one mechanism out of the fixed protocol (or, with
 * --proto=impl given, out of impl: noepoch, nocas, noseed or allatonce), to
 * show that the checker catches it: noepoch (the compare-and-set ignores
 * the epoch), nocas (it ignores hwm <= M), noseed (a change seeds nobody;
 * impl: the adopt leaves the joiner unseeded, as before 11659f2), allatonce
 * (a change may add or remove two members; safe in impl, whose adds need
 * every member and seed the joiners), noquorum (removing one of two members
 * without its vote), nopending (voters usable before they are seeded; that
 * one needs a proposer to die right after it moved, twice in a row, and is
 * rarely caught).
 *
 * --scenario=NAME replays a counterexample step by step, with no other
 * event: twonode, shrink, shrink5, joiners (see scenario() below).  The
 * first three remove members: under impl the removes are refused unless
 * --changes=add,remove.
 *
 * With adds only, a group can wedge for good (an add that failed after a
 * voter moved, and whose revert of that voter failed too: no later change
 * finds every member in one epoch, and there is no remove).  So such runs
 * (--restart=STEPS, the default with adds only) start a new cluster of fresh
 * nodes when no change was done for a while, and (--vary) give each
 * cluster its own mix of events, see draw_mix().
 *
 * C99, no dependencies, deterministic for a given set of options.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;
typedef uint64_t u64;

#define MAXN		100			/* nodes (machines) */
#define MAXMEM		128			/* members in a view */
#define MAXAGENTS	64
#define MAXPROP		8
#define MAXMSG		64			/* requests held in the network */
#define RING		4096		/* trace lines kept for a violation */
#define LINE		256

enum { PROTO_IMPL, PROTO_FIXED, PROTO_BRIEF };
static const char *proto_names[] = {"impl", "fixed", "brief"};
enum { BRK_NONE, BRK_NOEPOCH, BRK_NOCAS, BRK_NOSEED, BRK_ALLATONCE, BRK_NOQUORUM,
	BRK_NOPENDING, BRK_COUNT };
static const char *brk_names[] = {"none", "noepoch", "nocas", "noseed", "allatonce",
	"noquorum", "nopending"};

/* options */
static u64	opt_seed = 1;
static int	N = 5;
static long nsteps = 100000;
static int	K = 4;				/* concurrent agents */
static int	NP = 2;				/* concurrent membership changes */
static int	proto = PROTO_IMPL;
static int	brk = BRK_NONE;
static int	trace_level = 0;
static int	show_lines = 120;
static int	opt_dump = 0;
static int	opt_ops = 0;			/* 1: adds only, 2: removes only, 3: both; 0: the
								 * protocol's (impl: adds only, else both) */
static long opt_restart = -1;	/* a new cluster after so many steps with no
								 * change done (0: never; -1: the default) */
static int	opt_vary = -1;		/* a mix of events per cluster (-1: when they restart) */
static const char *opt_scenario;
static double p_anom;			/* per call: reply lost, or request delayed */
static double p_read;			/* per agent read: it times out */
static double fscale;			/* crashes and partitions: rarer in large groups */

/* the fixes (see the top of the file) */
#define FX_QUORUM	1
#define FX_SEED		2
#define FX_MISSING	4
#define FX_RESUME	8
#define FX_ALL		15
#define NFIXES		4
static const char *fix_names[] = {"quorum", "seed", "missing", "resume"};
static int	fixes;

#define BRIEF	(proto == PROTO_BRIEF)
#define FIX(f)	((fixes & (f)) != 0)
/* a node keeps a seed for a sequence it does not have (impl: distseq_seed) */
#define SEEDKEPT (proto == PROTO_IMPL || FIX(FX_MISSING))

/* ---- random numbers: xoshiro256** seeded by splitmix64 ---- */

static u64	rs[4];

static u64
splitmix(u64 *x)
{
	u64			z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static u64
rotl(u64 x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static u64
rnd64(void)
{
	u64			r = rotl(rs[1] * 5, 7) * 9;
	u64			t = rs[1] << 17;

	rs[2] ^= rs[0];
	rs[3] ^= rs[1];
	rs[1] ^= rs[2];
	rs[0] ^= rs[3];
	rs[2] ^= t;
	rs[3] = rotl(rs[3], 45);
	return r;
}

static int
rnd(int n)
{
	return n <= 1 ? 0 : (int) (rnd64() % (u64) n);
}

static int
chance(double p)
{
	return (double) (rnd64() >> 11) * (1.0 / 9007199254740992.0) < p;
}

/* ---- sets of node ids, in insertion order (like the members array) ---- */

typedef struct
{
	int			n;
	int			v[MAXMEM];
} Set;

static int
set_has(const Set *s, int x)
{
	for (int i = 0; i < s->n; i++)
		if (s->v[i] == x)
			return 1;
	return 0;
}

static void
set_add(Set *s, int x)
{
	if (!set_has(s, x) && s->n < MAXMEM)
		s->v[s->n++] = x;
}

static void
set_del(Set *s, int x)
{
	int			j = 0;

	for (int i = 0; i < s->n; i++)
		if (s->v[i] != x)
			s->v[j++] = s->v[i];
	s->n = j;
}

static int
maj(int n)
{
	return n / 2 + 1;
}

static const char *
set_str(const Set *s, char *buf, size_t len)
{
	size_t		k = 0;

	k += (size_t) snprintf(buf + k, len - k, "{");
	for (int i = 0; i < s->n && k < len; i++)
	{
		if (i >= 12)
		{
			snprintf(buf + k, len - k, ",...(%d)", s->n);
			k = strlen(buf);
			break;
		}
		k += (size_t) snprintf(buf + k, len - k, "%sn%d", i ? "," : "", s->v[i]);
	}
	if (k < len)
		snprintf(buf + k, len - k, "}");
	return buf;
}

/* ---- the nodes ---- */

typedef struct
{
	int			id;				/* identity; a wiped machine gets a new one */
	int			up;
	int			joined;			/* seed, or adopted a membership */
	int			has_seq;		/* has the sequence (impl: may lack it) */
	int			pending;		/* fixed: in a new epoch, not seeded yet */
	int			lock;			/* impl: proposer holding an uncommitted epoch change */
	int			nwin;
	i64			hwm;			/* without the sequence: the seed kept, if any */
	i64			epoch;
	u64			eid;
	Set			mem;
	/* resume fix: who proposed this epoch, and the one before it */
	int			prop;
	i64			oepoch;
	u64			oeid;
	Set			omem;
} Node;

static Node nd[MAXN];
static int *idslot;
static int	nids, capids;
static unsigned char cut[MAXN][MAXN];
static unsigned char flaky[MAXN][MAXN];	/* reads on that link mostly time out */

static int
slot_of(int id)
{
	return id >= 0 && id < nids ? idslot[id] : -1;
}

static int
new_id(int slot)
{
	if (nids == capids)
	{
		capids = capids ? capids * 2 : 256;
		idslot = realloc(idslot, sizeof(int) * (size_t) capids);
		if (!idslot)
			abort();
	}
	idslot[nids] = slot;
	return nids++;
}

static int
in_own_view(int s)
{
	return set_has(&nd[s].mem, nd[s].id);
}

/*
 * Does a node return a mark for the sequence from an epoch compare-and-set,
 * or count its own as proposer (impl: only when it has the sequence; the
 * seed it keeps otherwise, in hwm too, is not returned)?
 */
static int
keeps_mark(int s)
{
	return BRIEF || FIX(FX_MISSING) || nd[s].has_seq;
}

/* ---- trace ---- */

static long step_no;
static long burst_until;		/* an administrator's script: changes back to back */
static char (*ring)[LINE];
static long ring_n;

static void
note(int lvl, const char *fmt,...)
{
	char		buf[LINE];
	va_list		ap;
	int			k = snprintf(buf, sizeof buf, "%8ld  ", step_no);

	va_start(ap, fmt);
	vsnprintf(buf + k, sizeof buf - (size_t) k, fmt, ap);
	va_end(ap);
	if (lvl <= 1)
	{
		memcpy(ring[ring_n % RING], buf, LINE);
		ring_n++;
	}
	if (trace_level >= lvl)
		puts(buf);
}

static const char *
epstr(i64 e, u64 id, char *buf)
{
	snprintf(buf, 32, "%lld/%04llx", (long long) e, (unsigned long long) (id & 0xffff));
	return buf;
}

static void
dump_nodes(void)
{
	char		b1[32],
				b2[LINE];

	printf("--- nodes now\n");
	for (int s = 0; s < N; s++)
		printf("  n%-4d %-4s %s%s%s epoch %-12s hwm %-8lld windows %-4d members %s\n",
			   nd[s].id, nd[s].up ? "up" : "DOWN", nd[s].joined ? "joined" : "fresh ",
			   nd[s].has_seq ? " seq" : " ---", nd[s].pending ? " PENDING" : "",
			   epstr(nd[s].epoch, nd[s].eid, b1), (long long) nd[s].hwm, nd[s].nwin,
			   set_str(&nd[s].mem, b2, sizeof b2));
}

static void
config_line(FILE *f)
{
	if (opt_scenario)
		fprintf(f, "scenario=%s proto=%s", opt_scenario, proto_names[proto]);
	else
		fprintf(f, "seed=%llu nodes=%d steps=%ld agents=%d proto=%s",
				(unsigned long long) opt_seed, N, nsteps, K, proto_names[proto]);
	if (proto != PROTO_FIXED && fixes)
	{
		const char *sep = " fix=";

		for (int k = 0; k < NFIXES; k++)
			if (fixes & (1 << k))
			{
				fprintf(f, "%s%s", sep, fix_names[k]);
				sep = ",";
			}
	}
	if (brk)
		fprintf(f, " broken=%s", brk_names[brk]);
	fprintf(f, " changes=%s", opt_ops == 1 ? "add" : opt_ops == 2 ? "remove" : "both");
	if (!opt_scenario && opt_restart > 0)
		fprintf(f, " restart=%ld", opt_restart);
	if (!opt_scenario && opt_vary > 0)
		fprintf(f, " vary");
}

static void
violation(const char *fmt,...)
{
	char		msg[1024];
	va_list		ap;
	long		first = ring_n > show_lines ? ring_n - show_lines : 0;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fflush(stdout);
	printf("VIOLATION at step %ld: %s\n", step_no, msg);
	printf("--- last %ld events (step, event); rerun with --trace for all\n", ring_n - first);
	for (long i = first; i < ring_n; i++)
		printf("%s\n", ring[i % RING]);
	dump_nodes();
	printf("VIOLATION (");
	fflush(stdout);
	config_line(stdout);
	printf(") at step %ld: %s\n", step_no, msg);
	exit(1);
}

/* ---- statistics ---- */

static struct
{
	long		attempts, windows, inl, lost, nomaj, agent_crash;
	long		ch_start, ch_ok, ch_fail, revert_fail, adopt_fail, seed_fail, prop_crash;
	long		repairs, crashes, wipes, delayed, delivered, lost_replies, waits;
	long		clusters, last_change;	/* clusters run; the step of the last change done */
}			st;

/* ---- windows and marks: the two properties ---- */

typedef struct
{
	i64			s, e;
	int			node;
	long		step;
	char		how[200];
} Win;

static Win *win;
static int	nwin, capwin;

static void
set_hwm(int s, i64 v)
{
	if (v < nd[s].hwm)
		violation("hwm of n%d would go down from %lld to %lld", nd[s].id,
				  (long long) nd[s].hwm, (long long) v);
	nd[s].hwm = v;
}

static void
add_window(int s, i64 lo, i64 hi, const char *how)
{
	int			a = 0,
				b = nwin;

	while (a < b)
	{
		int			m = (a + b) / 2;

		if (win[m].s < lo)
			a = m + 1;
		else
			b = m;
	}
	for (int j = a - 1; j <= a; j++)
	{
		if (j < 0 || j >= nwin)
			continue;
		if (win[j].s < hi && lo < win[j].e)
			violation("windows overlap: [%lld,%lld) made by %s, and [%lld,%lld) made at step %ld by %s",
					  (long long) lo, (long long) hi, how, (long long) win[j].s,
					  (long long) win[j].e, win[j].step, win[j].how);
	}
	if (nwin == capwin)
	{
		capwin = capwin ? capwin * 2 : 1024;
		win = realloc(win, sizeof(Win) * (size_t) capwin);
		if (!win)
			abort();
	}
	memmove(&win[a + 1], &win[a], sizeof(Win) * (size_t) (nwin - a));
	win[a].s = lo;
	win[a].e = hi;
	win[a].node = nd[s].id;
	win[a].step = step_no;
	snprintf(win[a].how, sizeof win[a].how, "%s", how);
	nwin++;
	nd[s].nwin++;
	set_hwm(s, nd[s].hwm > hi ? nd[s].hwm : hi);
}

/* ---- messages: one call on one node, atomic there ---- */

enum { M_CAS, M_EPOCH, M_REVERT, M_ADOPT, M_SEED, M_INTRO };
static const char *msg_names[] = {"cas", "epoch-cas", "revert", "adopt", "seed", "introduce"};

typedef struct
{
	int			kind, to;
	i64			E, E2, M, nh, seed;
	u64			Eid, id2;
	int			pend, seedok, prop;
	Set			set;
	char		from[40];
} Msg;

static Msg	msgs[MAXMSG];
static int	nmsg;

enum { R_FAIL, R_OK, R_WAIT };

/*
 * Apply a call on node slot s.  R_WAIT when it must wait for a lock (an
 * uncommitted epoch change on that node, impl).  *acc: it did what was asked;
 * *mark: the mark returned by an epoch compare-and-set, -1 for none.
 */
static int
apply(int s, const Msg *m, i64 *mark, int *acc)
{
	Node	   *n = &nd[s];
	char		b1[32],
				b2[32];

	*acc = 0;
	*mark = -1;
	if (n->lock >= 0 && m->kind != M_INTRO)
		return R_WAIT;
	switch (m->kind)
	{
		case M_CAS:
			if (!BRIEF && !n->has_seq)
				break;			/* UPDATE found no row */
			if (brk != BRK_NOEPOCH &&
				(n->epoch != m->E || n->eid != m->Eid || n->pending))
				break;
			if (brk != BRK_NOCAS && n->hwm > m->M)
				break;
			set_hwm(s, n->hwm > m->nh ? n->hwm : m->nh);
			*acc = 1;
			break;
		case M_EPOCH:
			if (n->epoch != m->E || n->eid != m->Eid || n->pending)
				break;
			n->prop = m->prop;
			n->oepoch = n->epoch;
			n->oeid = n->eid;
			n->omem = n->mem;
			n->epoch = m->E2;
			n->eid = m->id2;
			n->mem = m->set;
			n->pending = m->pend;
			if (keeps_mark(s))
				*mark = n->hwm;
			*acc = 1;
			break;
		case M_REVERT:
			if (n->epoch != m->E2 || n->eid != m->id2)
				break;
			n->epoch = m->E;
			n->eid = m->Eid;
			n->mem = m->set;
			n->pending = 0;
			n->prop = -1;
			*acc = 1;
			break;
		case M_ADOPT:
			/* the same membership again, or a fresh node (checked under its lock) */
			if (!((n->epoch == m->E2 && n->eid == m->id2) ||
				  (n->epoch == 0 && n->mem.n == 1 && n->mem.v[0] == n->id && n->nwin == 0)))
				break;
			n->epoch = m->E2;
			n->eid = m->id2;
			n->mem = m->set;
			n->pending = 0;
			n->prop = -1;
			n->joined = 1;
			/* impl: the hwm if it has the sequence, its seed if not */
			if (m->seedok && brk != BRK_NOSEED && (keeps_mark(s) || SEEDKEPT) &&
				m->seed > n->hwm)
				set_hwm(s, m->seed);
			*acc = 1;
			break;
		case M_SEED:
			if (n->epoch != m->E2 || n->eid != m->id2)
				break;
			if (brk != BRK_NOSEED && keeps_mark(s) && m->seed > n->hwm)
				set_hwm(s, m->seed);
			n->pending = 0;
			n->prop = -1;
			*acc = 1;
			break;
		case M_INTRO:
			if (n->has_seq)
				break;			/* exists: peer_create returns false */
			n->has_seq = 1;
			/* created at the mark read, or at the seed kept if larger */
			set_hwm(s, SEEDKEPT && n->hwm > m->M ? n->hwm : m->M);
			*acc = 1;
			break;
	}
	note(2, "    %s on n%d from %s: %s (node now epoch %s hwm %lld)%s",
		 msg_names[m->kind], n->id, m->from, *acc ? "done" : "refused",
		 epstr(n->epoch, n->eid, b1), (long long) n->hwm,
		 m->kind == M_CAS ? (snprintf(b2, sizeof b2, " M=%lld", (long long) m->M), b2) : "");
	return R_OK;
}

static int
reach(int a, int bid)
{
	int			b = slot_of(bid);

	if (b < 0 || !nd[a].up || !nd[b].up)
		return -1;
	if (a != b && cut[a][b])
		return -1;
	return b;
}

static void
delay_msg(const Msg *m)
{
	if (nmsg < MAXMSG)
	{
		msgs[nmsg++] = *m;
		st.delayed++;
		note(1, "  %s to n%d from %s: held in the network (caller sees a failure)",
			 msg_names[m->kind], m->to, m->from);
	}
}

/* a remote call from slot "from"; anything but R_OK looks like a failure */
static int
rcall(int from, Msg *m, i64 *mark, int *acc)
{
	int			t = reach(from, m->to);
	int			r;

	*acc = 0;
	*mark = -1;
	if (t < 0)
		return R_FAIL;
	if (chance(p_anom))
	{
		delay_msg(m);
		return R_FAIL;
	}
	r = apply(t, m, mark, acc);
	if (r == R_WAIT)
	{
		st.waits++;
		if (chance(0.05))
		{
			/* the caller times out; the server still runs it later */
			delay_msg(m);
			return R_FAIL;
		}
		return R_WAIT;
	}
	if (chance(p_anom))
	{
		st.lost_replies++;
		note(1, "  %s on n%d from %s: applied (%s), reply lost", msg_names[m->kind],
			 m->to, m->from, *acc ? "done" : "refused");
		*acc = 0;
		*mark = -1;
		return R_FAIL;
	}
	return R_OK;
}

/* a read from slot "from": the callee's committed state, or -1 */
static int
rread(int from, int id)
{
	int			t = reach(from, id);

	if (t >= 0 && chance(flaky[from][t] ? 0.7 : p_read))
		return -1;
	return t;
}

/* ---- agents (agent.c: agent_read, agent_introduce, agent_allocate) ---- */

enum { A_READ, A_INTRO, A_CAS, A_LOCAL };
#define F_REACH 1
#define F_INEP	2
#define F_SEQ	4

typedef struct
{
	int			on, slot, id;
	long		no;
	i64			E;
	u64			Eid;
	Set			mem;
	int			ph, idx, read, wins;
	i64			top, X;
	unsigned char fl[MAXMEM];
	Set			won;
} Agent;

static Agent ag[MAXAGENTS];

static int
agent_ok(int s)
{
	if (!nd[s].up || !in_own_view(s))
		return 0;
	if (BRIEF)
		return nd[s].joined;
	if (!nd[s].has_seq)
		return 0;
	if (!in_own_view(s))
		return 0;
	return 1;
}

static void
agent_begin(Agent *a, int s)
{
	char		b1[32],
				b2[LINE];

	memset(a, 0, sizeof *a);
	a->on = 1;
	a->slot = s;
	a->id = nd[s].id;
	a->no = ++st.attempts;
	a->E = nd[s].epoch;
	a->Eid = nd[s].eid;
	a->mem = nd[s].mem;
	a->ph = A_READ;
	a->top = nd[s].hwm;			/* the local mark, read first */
	a->read = 1;
	a->X = 1 + rnd(8);
	note(2, "agent#%ld on n%d starts: epoch %s members %s, own hwm %lld", a->no, a->id,
		 epstr(a->E, a->Eid, b1), set_str(&a->mem, b2, sizeof b2), (long long) a->top);
}

static void
agent_start(Agent *a)
{
	int			cand[MAXN],
				nc = 0;

	for (int i = 0; i < N; i++)
		if (agent_ok(i))
			cand[nc++] = i;
	if (nc > 0)
		agent_begin(a, cand[rnd(nc)]);
}

static void
agent_step(Agent *a)
{
	int			s = a->slot;
	int			mj = maj(a->mem.n);
	char		b1[32],
				b2[LINE],
				how[200];
	Msg			m;
	i64			mark;
	int			acc,
				r,
				i;

	switch (a->ph)
	{
		case A_READ:
			while (a->idx < a->mem.n && a->mem.v[a->idx] == a->id)
				a->idx++;
			if (a->idx >= a->mem.n)
			{
				if (a->read < mj)
				{
					st.nomaj++;
					note(1, "agent#%ld on n%d: no majority (%d of %d read in epoch %s)",
						 a->no, a->id, a->read, a->mem.n, epstr(a->E, a->Eid, b1));
					a->on = 0;
					return;
				}
				note(2, "agent#%ld on n%d: read %d of %d, M=%lld", a->no, a->id, a->read,
					 a->mem.n, (long long) a->top);
				a->ph = BRIEF ? A_CAS : A_INTRO;
				a->idx = 0;
				return;
			}
			i = a->idx++;
			{
				int			t = rread(s, a->mem.v[i]);
				int			seq;

				if (t < 0)
					return;
				seq = BRIEF || nd[t].has_seq;
				a->fl[i] = F_REACH | (seq ? F_SEQ : 0);
				if (nd[t].epoch == a->E && nd[t].eid == a->Eid && !nd[t].pending)
				{
					a->fl[i] |= F_INEP;
					a->read++;
					/* a member lacking the sequence answers with its seed, if kept */
					if ((seq || SEEDKEPT) && nd[t].hwm > a->top)
						a->top = nd[t].hwm;
				}
			}
			return;

		case A_INTRO:
			for (i = a->idx; i < a->mem.n; i++)
				if (a->mem.v[i] != a->id && (a->fl[i] & (F_REACH | F_INEP)) == (F_REACH | F_INEP) &&
					!(a->fl[i] & F_SEQ))
					break;
			if (i >= a->mem.n)
			{
				a->ph = A_CAS;
				a->idx = 0;
				return;
			}
			memset(&m, 0, sizeof m);
			m.kind = M_INTRO;
			m.to = a->mem.v[i];
			m.M = a->top;
			snprintf(m.from, sizeof m.from, "agent#%ld", a->no);
			r = rcall(s, &m, &mark, &acc);
			if (r == R_OK)
			{
				a->fl[i] |= F_SEQ;
				if (acc)
					note(1, "agent#%ld on n%d: introduced the sequence on n%d with hwm %lld",
						 a->no, a->id, m.to, (long long) a->top);
			}
			else
				a->fl[i] &= (unsigned char) ~F_REACH;
			a->idx = i + 1;
			return;

		case A_CAS:
			for (i = a->idx; i < a->mem.n; i++)
				if (a->mem.v[i] != a->id && (a->fl[i] & (F_REACH | F_INEP | F_SEQ)) == (F_REACH | F_INEP | F_SEQ))
					break;
			if (i >= a->mem.n)
			{
				a->ph = A_LOCAL;
				return;
			}
			memset(&m, 0, sizeof m);
			m.kind = M_CAS;
			m.to = a->mem.v[i];
			m.E = a->E;
			m.Eid = a->Eid;
			m.M = a->top;
			m.nh = a->top + a->X;
			snprintf(m.from, sizeof m.from, "agent#%ld", a->no);
			r = rcall(s, &m, &mark, &acc);
			if (r == R_WAIT)
				return;
			if (r == R_FAIL)
				a->fl[i] &= (unsigned char) ~F_REACH;
			else if (acc)
			{
				a->wins++;
				set_add(&a->won, m.to);
			}
			a->idx = i + 1;
			return;

		case A_LOCAL:
			/* this node last; the window is inserted in the same transaction */
			if (nd[s].lock >= 0)
			{
				st.waits++;
				return;
			}
			memset(&m, 0, sizeof m);
			m.kind = M_CAS;
			m.to = a->id;
			m.E = a->E;
			m.Eid = a->Eid;
			m.M = a->top;
			m.nh = a->top + a->X;
			snprintf(m.from, sizeof m.from, "agent#%ld", a->no);
			apply(s, &m, &mark, &acc);
			if (acc)
			{
				a->wins++;
				set_add(&a->won, a->id);
			}
			if (a->wins >= mj)
			{
				snprintf(how, sizeof how, "agent#%ld on n%d, epoch %s members %s, M=%lld, won on %s",
						 a->no, a->id, epstr(a->E, a->Eid, b1), set_str(&a->mem, b2, 120),
						 (long long) a->top, set_str(&a->won, b2 + 120, sizeof b2 - 120));
				st.windows++;
				note(1, "agent#%ld on n%d WINS [%lld,%lld): epoch %s, %d of %d members %s",
					 a->no, a->id, (long long) a->top, (long long) (a->top + a->X),
					 epstr(a->E, a->Eid, b1), a->wins, a->mem.n, b2 + 120);
				add_window(s, a->top, a->top + a->X, how);
			}
			else
			{
				st.lost++;
				note(1, "agent#%ld on n%d lost: won on %s, %d of %d members, M=%lld", a->no,
					 a->id, set_str(&a->won, b2, sizeof b2), a->wins, a->mem.n,
					 (long long) a->top);
			}
			a->on = 0;
			return;
	}
}

/*
 * Inline allocation of a node alone (catalog.c, catalog_ensure_windows): it
 * checks that the membership has one member under a share lock on the node
 * row, held until the window is in, so it is one step here, and waits while
 * an epoch change of its own node is uncommitted.  Run by the node's refill
 * worker, like the agent: never in the middle of an agent attempt there.
 */
static void
inline_event(void)
{
	int			cand[MAXN],
				nc = 0,
				s;
	i64			top,
				X = 1 + rnd(8);
	char		how[200];

	if (BRIEF)
		return;
	for (int i = 0; i < N; i++)
	{
		int			busy = 0;

		if (!nd[i].up || !nd[i].has_seq || nd[i].mem.n != 1 || nd[i].lock >= 0 ||
			(FIX(FX_QUORUM) && !in_own_view(i)))
			continue;
		for (int k = 0; k < K; k++)
			if (ag[k].on && ag[k].slot == i)
				busy = 1;
		if (!busy)
			cand[nc++] = i;
	}
	if (nc == 0)
		return;
	s = cand[rnd(nc)];
	top = nd[s].hwm;
	snprintf(how, sizeof how, "inline refill on n%d (alone), top %lld", nd[s].id,
			 (long long) top);
	st.inl++;
	note(1, "inline refill on n%d (alone) makes [%lld,%lld)", nd[s].id, (long long) top,
		 (long long) (top + X));
	add_window(s, top, top + X, how);
}

/* ---- membership changes (member.c: distseq_add_peer, remove_peer, member_change) ---- */

enum { P_FRESH, P_VOTE, P_LOCAL, P_ADOPT, P_COMMIT, P_REVERT, P_SEED };
enum { OP_ADD = 1, OP_REMOVE };

typedef struct
{
	int			on, slot, id, op, ntg, tg[2], tent, ph, idx, seedok, dormant, tries;
	long		no;
	i64			E, seed;
	u64			Eid, nid;
	Set			Mold, Mnew, rv, acc, sl;
} Prop;

static Prop pr[MAXPROP];

/*
 * The proposers' logs: the changes that committed (the proposer moved
 * itself).  A node in the epoch of a change can ask its proposer how it
 * ended (resume fix).
 */
static u64 *committed;
static int	ncommitted, capcommitted;

static void
log_commit(u64 nid)
{
	if (ncommitted == capcommitted)
	{
		capcommitted = capcommitted ? capcommitted * 2 : 256;
		committed = realloc(committed, sizeof(u64) * (size_t) capcommitted);
		if (!committed)
			abort();
	}
	committed[ncommitted++] = nid;
}

static int
was_committed(u64 nid)
{
	for (int i = ncommitted - 1; i >= 0; i--)
		if (committed[i] == nid)
			return 1;
	return 0;
}

static int
prop_on(int s)
{
	for (int j = 0; j < NP; j++)
		if (pr[j].on && pr[j].slot == s)
			return 1;
	return 0;
}

static int
prop_ok(int s)
{
	if (!nd[s].up || !nd[s].joined || prop_on(s))
		return 0;
	if (nd[s].pending || !in_own_view(s))
		return 0;
	return 1;
}

static void
prop_end(Prop *p, int ok, const char *why)
{
	char		b1[32],
				b1b[32],
				b2[LINE];

	if (p->tent)
	{
		nd[p->slot].lock = -1;
		p->tent = 0;
	}
	p->on = 0;
	if (ok)
	{
		st.ch_ok++;
		st.last_change = step_no;
	}
	else
		st.ch_fail++;
	note(1, "change#%ld by n%d %s: %s -> %s %s%s%s", p->no, p->id,
		 ok ? "SUCCEEDED" : "FAILED", epstr(p->E, p->Eid, b1),
		 set_str(&p->Mnew, b2, sizeof b2), epstr(p->E + 1, p->nid, b1b),
		 why ? ": " : "", why ? why : "");
}

/*
 * The proposer dies.  impl: nothing more happens (an uncommitted move of its
 * own node rolls back).  With the resume fix the change was logged on its
 * node first, and resumes when that node is up: it reverts every voter (a
 * revert is a compare-and-set, harmless where the move never happened), or
 * finishes seeding when it had moved itself.
 */
static void
prop_die(Prop *p, const char *why)
{
	st.prop_crash++;
	if (!FIX(FX_RESUME) || p->ph == P_FRESH)
	{
		prop_end(p, 0, why);
		return;
	}
	if (p->tent)
	{
		nd[p->slot].lock = -1;
		p->tent = 0;
	}
	if (p->ph != P_SEED)
	{
		p->ph = P_REVERT;
		p->acc = p->rv;
		p->idx = 0;
	}
	p->dormant = 1;
	note(1, "change#%ld by n%d: proposer dies (%s); will resume", p->no, p->id, why);
}

/* start a change by slot s: op, and the ids of its ntg targets */
static void
prop_begin(Prop *p, int s, int op, const int *tg, int ntg)
{
	char		b1[32],
				b1b[32],
				b2[LINE],
				b3[LINE];

	memset(p, 0, sizeof *p);
	p->slot = s;
	p->id = nd[s].id;
	p->E = nd[s].epoch;
	p->Eid = nd[s].eid;
	p->Mold = nd[s].mem;
	p->op = op;
	p->ntg = ntg;
	p->Mnew = p->Mold;
	for (int k = 0; k < ntg; k++)
	{
		p->tg[k] = tg[k];
		if (op == OP_ADD)
			set_add(&p->Mnew, tg[k]);
		else
			set_del(&p->Mnew, tg[k]);
	}
	/* fixed: the one removed of two members votes too, first */
	if (FIX(FX_QUORUM) && p->op == OP_REMOVE && p->Mold.n == 2)
		set_add(&p->rv, p->tg[0]);
	for (int i = 0; i < p->Mnew.n; i++)
		if (p->Mnew.v[i] != p->id && set_has(&p->Mold, p->Mnew.v[i]))
			set_add(&p->rv, p->Mnew.v[i]);
	do
		p->nid = rnd64() >> 1;
	while (p->nid == 0);
	p->on = 1;
	p->no = ++st.ch_start;
	if (step_no >= burst_until && chance(0.1))
		burst_until = step_no + 8 * (N + 4);
	p->ph = p->op == OP_ADD ? P_FRESH : P_VOTE;
	note(1, "change#%ld by n%d starts: %s n%d%s%s, epoch %s %s -> %s %s, voters %s + itself",
		 p->no, p->id, p->op == OP_ADD ? "add" : "remove", p->tg[0], p->ntg > 1 ? " and n" : "",
		 p->ntg > 1 ? (snprintf(b3, 16, "%d", p->tg[1]), b3) : "",
		 epstr(p->E, p->Eid, b1), set_str(&p->Mold, b2, 100),
		 epstr(p->E + 1, p->nid, b1b), set_str(&p->Mnew, b2 + 100, 100),
		 set_str(&p->rv, b2 + 200, sizeof b2 - 200));
}

static void
prop_start(Prop *p)
{
	int			cand[MAXN],
				nc = 0,
				s,
				op,
				ntg = 1,
				tg[2];
	int			addc[MAXN],
				na = 0;
	Set			remc;
	Set		   *old;

	/* mostly run by a node of the newest epoch: the others are removed ones */
	{
		i64			top = -1;
		int			newest = chance(0.8);

		for (int i = 0; i < N; i++)
			if (prop_ok(i) && nd[i].epoch > top)
				top = nd[i].epoch;
		for (int i = 0; i < N; i++)
			if (prop_ok(i) && (!newest || nd[i].epoch == top))
				cand[nc++] = i;
	}
	if (nc == 0)
		return;
	s = cand[rnd(nc)];
	old = &nd[s].mem;
	/* joiners: usually fresh machines, sometimes anyone (refused unless fresh) */
	{
		int			freshonly = chance(0.9);

		for (int t = 0; t < N; t++)
			if (t != s && !set_has(old, nd[t].id) &&
				(!freshonly || (nd[t].epoch == 0 && !nd[t].joined)))
				addc[na++] = t;
	}
	remc = *old;
	set_del(&remc, nd[s].id);
	if (!(opt_ops & 1))
		na = 0;
	if (!(opt_ops & 2))
		remc.n = 0;
	if (na > 0 && (remc.n == 0 || chance(old->n < (N * 2) / 3 ? 0.8 : 0.3)))
		op = OP_ADD;
	else if (remc.n > 0)
		op = OP_REMOVE;
	else
		return;
	if (brk == BRK_ALLATONCE && chance(0.5) && (op == OP_ADD ? na : remc.n) >= 2)
		ntg = 2;
	for (int k = 0; k < ntg; k++)
	{
		if (op == OP_ADD)
		{
			int			j = rnd(na);

			tg[k] = nd[addc[j]].id;
			addc[j] = addc[--na];
		}
		else
		{
			tg[k] = remc.v[rnd(remc.n)];
			set_del(&remc, tg[k]);
		}
	}
	prop_begin(p, s, op, tg, ntg);
}

/* the proposer moves itself: the change commits */
static void
apply_view(Node *n, const Prop *p)
{
	n->epoch = p->E + 1;
	n->eid = p->nid;
	n->mem = p->Mnew;
	n->prop = -1;
	log_commit(p->nid);
}

static void
prop_step(Prop *p)
{
	int			s = p->slot;
	Node	   *n = &nd[s];
	Msg			m;
	i64			mark;
	int			acc,
				r;
	char		why[200];

	if (p->dormant)
	{
		if (!n->up)
			return;
		p->dormant = 0;
		note(1, "change#%ld by n%d resumes: %s", p->no, p->id,
			 p->ph == P_SEED ? "seeding" : "reverting every voter");
	}
	memset(&m, 0, sizeof m);
	snprintf(m.from, sizeof m.from, "change#%ld", p->no);
	switch (p->ph)
	{
		case P_FRESH:
			{
				int			d = p->tg[p->idx];
				int			t = rread(s, d);

				if (t < 0)
				{
					snprintf(why, sizeof why, "joiner n%d unreachable", d);
					prop_end(p, 0, why);
					return;
				}
				/* distseq_add_peer: epoch 0, one member, no windows */
				if (nd[t].epoch != 0 || nd[t].mem.n != 1 || nd[t].nwin != 0)
				{
					snprintf(why, sizeof why, "n%d is not fresh", d);
					prop_end(p, 0, why);
					return;
				}
				if (++p->idx == p->ntg)
				{
					p->ph = P_VOTE;
					p->idx = 0;
				}
				return;
			}

		case P_VOTE:
			if (p->idx >= p->rv.n)
			{
				p->ph = P_LOCAL;
				return;
			}
			m.kind = M_EPOCH;
			m.to = p->rv.v[p->idx];
			m.E = p->E;
			m.Eid = p->Eid;
			m.E2 = p->E + 1;
			m.id2 = p->nid;
			m.set = p->Mnew;
			m.pend = FIX(FX_SEED) && brk != BRK_NOPENDING;
			m.prop = p->id;
			r = rcall(s, &m, &mark, &acc);
			if (r == R_WAIT)
				return;
			if (r == R_FAIL || !acc)
			{
				/* every voter tried is put back: it may have moved (a lost reply) */
				set_add(&p->acc, m.to);
				note(1, "change#%ld by n%d: voter n%d %s; reverting the %d tried", p->no, p->id,
					 m.to, r == R_FAIL ? "unreachable" : "refused", p->acc.n);
				p->ph = P_REVERT;
				p->idx = 0;
				return;
			}
			note(1, "change#%ld by n%d: voter n%d moved, returned hwm %lld", p->no, p->id,
				 m.to, (long long) mark);
			set_add(&p->acc, m.to);
			if (mark >= 0)
			{
				if (!p->seedok || mark > p->seed)
					p->seed = mark;
				p->seedok = 1;
			}
			p->idx++;
			return;

		case P_LOCAL:
			if (n->epoch != p->E || n->eid != p->Eid || n->pending)
			{
				note(1, "change#%ld by n%d: its own node moved on; reverting %d", p->no, p->id,
					 p->acc.n);
				p->ph = P_REVERT;
				p->idx = 0;
				return;
			}
			if (keeps_mark(s))
			{
				if (!p->seedok || n->hwm > p->seed)
					p->seed = n->hwm;
				p->seedok = 1;
			}
			if (BRIEF)
			{
				apply_view(n, p);
				note(1, "change#%ld by n%d: moved itself; seed %lld", p->no, p->id,
					 (long long) p->seed);
				if (p->op == OP_ADD)
				{
					p->ph = P_ADOPT;
					p->idx = 0;
				}
				else
					prop_end(p, 1, NULL);
				return;
			}
			if (!FIX(FX_SEED))
			{
				/* member_epoch_cas in the caller's transaction: locked, not committed */
				p->tent = 1;
				n->lock = (int) (p - pr);
				note(1, "change#%ld by n%d: moved itself (uncommitted); seed %lld", p->no,
					 p->id, (long long) p->seed);
				p->ph = p->op == OP_ADD ? P_ADOPT : P_COMMIT;
				p->idx = 0;
				return;
			}
			/* fixed: move, take the largest mark, and be seeded, in one step */
			apply_view(n, p);
			n->pending = 0;
			if (brk != BRK_NOSEED && p->seedok && keeps_mark(s) && p->seed > n->hwm)
				set_hwm(s, p->seed);
			if (n->hwm > p->seed)
				p->seed = n->hwm;
			note(1, "change#%ld by n%d: moved itself, seed %lld", p->no, p->id,
				 (long long) p->seed);
			p->sl.n = 0;
			for (int i = 0; i < p->rv.n; i++)
				if (set_has(&p->Mnew, p->rv.v[i]))
					set_add(&p->sl, p->rv.v[i]);
			p->ph = P_SEED;
			p->idx = 0;
			return;

		case P_ADOPT:
			m.kind = M_ADOPT;
			m.to = p->tg[p->idx];
			m.E2 = p->E + 1;
			m.id2 = p->nid;
			m.set = p->Mnew;
			m.seed = p->seed;
			m.seedok = p->seedok;
			r = rcall(s, &m, &mark, &acc);
			if (r == R_WAIT)
				return;
			if (r == R_FAIL || !acc)
			{
				st.adopt_fail++;
				if (!BRIEF)
				{
					/* its own move is rolled back with its transaction; the voters reverted */
					note(1, "change#%ld by n%d: adopt on n%d failed; rolls back, reverting %d",
						 p->no, p->id, m.to, p->acc.n);
					n->lock = -1;
					p->tent = 0;
					p->ph = P_REVERT;
					p->idx = 0;
					return;
				}
				note(1, "change#%ld by n%d: adopt on n%d failed, it stays outside", p->no,
					 p->id, m.to);
			}
			else
				note(1, "change#%ld by n%d: n%d adopted the membership, seed %lld", p->no,
					 p->id, m.to, (long long) p->seed);
			if (++p->idx < p->ntg)
				return;
			if (!BRIEF)
				p->ph = P_COMMIT;
			else
				prop_end(p, 1, NULL);
			return;

		case P_COMMIT:
			apply_view(n, p);
			n->lock = -1;
			p->tent = 0;
			prop_end(p, 1, NULL);
			return;

		case P_REVERT:
			if (p->idx >= p->acc.n)
			{
				prop_end(p, 0, NULL);
				return;
			}
			m.kind = M_REVERT;
			m.to = p->acc.v[p->idx];
			m.E = p->E;
			m.Eid = p->Eid;
			m.E2 = p->E + 1;
			m.id2 = p->nid;
			m.set = p->Mold;
			r = rcall(s, &m, &mark, &acc);
			if (r == R_WAIT)
				return;
			if (r == R_FAIL && FIX(FX_RESUME) && ++p->tries < 40)
				return;			/* try that one again later */
			if (r == R_FAIL || !acc)
			{
				st.revert_fail++;
				note(1, "change#%ld by n%d: revert of n%d failed, it stays in %llx", p->no,
					 p->id, m.to, (unsigned long long) (p->nid & 0xffff));
			}
			else
				note(1, "change#%ld by n%d: n%d reverted", p->no, p->id, m.to);
			p->idx++;
			return;

		case P_SEED:
			if (p->idx >= p->sl.n + (p->op == OP_ADD ? p->ntg : 0))
			{
				prop_end(p, 1, NULL);
				return;
			}
			if (p->idx < p->sl.n)
			{
				m.kind = M_SEED;
				m.to = p->sl.v[p->idx];
			}
			else
			{
				m.kind = M_ADOPT;
				m.to = p->tg[p->idx - p->sl.n];
				m.set = p->Mnew;
				m.seedok = 1;
			}
			m.E2 = p->E + 1;
			m.id2 = p->nid;
			m.seed = p->seed;
			r = rcall(s, &m, &mark, &acc);
			if (r == R_WAIT)
				return;
			if (r == R_FAIL || !acc)
			{
				st.seed_fail++;
				if (m.kind == M_ADOPT)
					st.adopt_fail++;
				note(1, "change#%ld by n%d: %s of n%d failed (it stays %s)", p->no, p->id,
					 msg_names[m.kind], m.to, m.kind == M_ADOPT ? "outside" : "pending");
			}
			else
				note(1, "change#%ld by n%d: %s n%d with %lld", p->no, p->id,
					 m.kind == M_ADOPT ? "adopt + seed" : "seeded", m.to, (long long) p->seed);
			p->idx++;
			return;
	}
}

/*
 * Repairs.  Resume fix: a node in the epoch of a change asks the change's
 * proposer how it ended: committed, it is seeded with the proposer's mark
 * (at least the seed: the proposer raised itself to it when it moved); failed
 * (not committed, no longer running), it goes back to the epoch before; a
 * member that a seeded member lists but that is still in an older epoch (a
 * joiner whose adopt failed) adopts that epoch with that member's mark.
 * Seed fix: a pending member is seeded by a seeded member of its epoch.
 */
static void
repair_event(void)
{
	int			cand[MAXN],
				nc = 0,
				q,
				t;
	int			kind = rnd(3);

	if (kind == 0 && FIX(FX_RESUME))
	{
		/* ask the proposer */
		for (int i = 0; i < N; i++)
			if (nd[i].up && nd[i].prop >= 0)
				cand[nc++] = i;
		if (nc == 0)
			return;
		q = cand[rnd(nc)];
		t = rread(q, nd[q].prop);
		if (t < 0)
			return;
		if (was_committed(nd[q].eid))
		{
			st.repairs++;
			note(1, "repair: n%d asks n%d: change %04llx committed; seeded with %lld", nd[q].id,
				 nd[t].id, (unsigned long long) (nd[q].eid & 0xffff), (long long) nd[t].hwm);
			if (brk != BRK_NOSEED && keeps_mark(q) && nd[t].hwm > nd[q].hwm)
				set_hwm(q, nd[t].hwm);
			nd[q].pending = 0;
			nd[q].prop = -1;
			return;
		}
		for (int j = 0; j < NP; j++)
			if (pr[j].on && pr[j].slot == t && pr[j].nid == nd[q].eid)
				return;			/* still running: ask again later */
		st.repairs++;
		note(1, "repair: n%d asks n%d: change %04llx failed; back to epoch %lld", nd[q].id,
			 nd[t].id, (unsigned long long) (nd[q].eid & 0xffff), (long long) nd[q].oepoch);
		nd[q].epoch = nd[q].oepoch;
		nd[q].eid = nd[q].oeid;
		nd[q].mem = nd[q].omem;
		nd[q].pending = 0;
		nd[q].prop = -1;
		return;
	}
	if (kind == 1 && FIX(FX_RESUME))
	{
		/* a member left behind adopts */
		Msg			m;
		i64			mark;
		int			acc;

		for (int i = 0; i < N; i++)
			if (nd[i].up && !nd[i].pending && nd[i].joined && in_own_view(i) && nd[i].mem.n > 1)
				cand[nc++] = i;
		if (nc == 0)
			return;
		q = cand[rnd(nc)];
		t = rread(q, nd[q].mem.v[rnd(nd[q].mem.n)]);
		if (t < 0 || t == q || nd[t].epoch >= nd[q].epoch)
			return;
		memset(&m, 0, sizeof m);
		m.kind = M_ADOPT;
		m.to = nd[t].id;
		m.E2 = nd[q].epoch;
		m.id2 = nd[q].eid;
		m.set = nd[q].mem;
		m.seed = nd[q].hwm;
		m.seedok = 1;
		snprintf(m.from, sizeof m.from, "repair by n%d", nd[q].id);
		if (rcall(q, &m, &mark, &acc) == R_OK && acc)
		{
			st.repairs++;
			note(1, "repair: n%d (behind) adopts the epoch of n%d with %lld",
				 m.to, nd[q].id, (long long) m.seed);
		}
		return;
	}
	if (kind != 2 || !FIX(FX_SEED))
		return;
	for (int i = 0; i < N; i++)
		if (nd[i].up && nd[i].pending && in_own_view(i) && nd[i].mem.n > 1)
			cand[nc++] = i;
	if (nc == 0)
		return;
	q = cand[rnd(nc)];
	t = rread(q, nd[q].mem.v[rnd(nd[q].mem.n)]);
	if (t < 0 || t == q || nd[t].epoch != nd[q].epoch || nd[t].eid != nd[q].eid || nd[t].pending)
		return;
	st.repairs++;
	note(1, "repair: n%d (pending) seeded from n%d with %lld", nd[q].id, nd[t].id,
		 (long long) nd[t].hwm);
	if (brk != BRK_NOSEED && keeps_mark(q) && nd[t].hwm > nd[q].hwm)
		set_hwm(q, nd[t].hwm);
	nd[q].pending = 0;
	nd[q].prop = -1;
}

/* ---- faults ---- */

static void
kill_node_work(int s, const char *why)
{
	for (int k = 0; k < K; k++)
		if (ag[k].on && ag[k].slot == s)
		{
			ag[k].on = 0;
			st.agent_crash++;
			note(2, "agent#%ld dies (%s)", ag[k].no, why);
		}
	for (int j = 0; j < NP; j++)
		if (pr[j].on && pr[j].slot == s && !pr[j].dormant)
			prop_die(&pr[j], why);
}

static void
crash_event(void)
{
	int			down[MAXN],
				nd_ = 0,
				s;

	for (int i = 0; i < N; i++)
		if (!nd[i].up)
			down[nd_++] = i;
	if (nd_ > 0 && chance(0.6))
	{
		s = down[rnd(nd_)];
		nd[s].up = 1;
		note(1, "n%d recovers", nd[s].id);
		return;
	}
	s = rnd(N);
	if (!nd[s].up)
		return;
	kill_node_work(s, "its node crashed");
	nd[s].up = 0;
	st.crashes++;
	note(1, "n%d CRASHES", nd[s].id);
}

static void
net_event(void)
{
	int			a = rnd(N),
				b = rnd(N);
	double		x = (double) rnd(1000) / 1000.0;

	if (x < 0.35)
	{
		memset(cut, 0, sizeof cut);
		note(1, "network heals");
	}
	else if (x < 0.55)
	{
		if (a != b && cut[a][b])
		{
			cut[a][b] = cut[b][a] = 0;
			note(1, "link n%d-n%d heals", nd[a].id, nd[b].id);
		}
	}
	else if (x < 0.85)
	{
		unsigned char in[MAXN];
		char		buf[LINE];
		size_t		k = 0;
		int			size = 1 + rnd(N > 2 ? N / 2 : 1);

		memset(in, 0, sizeof in);
		for (int i = 0; i < size; i++)
			in[rnd(N)] = 1;
		buf[0] = 0;
		for (int i = 0; i < N && k < 200; i++)
			if (in[i])
				k += (size_t) snprintf(buf + k, sizeof buf - k, " n%d", nd[i].id);
		for (int i = 0; i < N; i++)
			for (int j = 0; j < N; j++)
				if (in[i] != in[j])
					cut[i][j] = 1;
		note(1, "partition: {%s } cut off from the rest", buf);
	}
	else if (a != b)
	{
		cut[a][b] = cut[b][a] = 1;
		note(1, "link n%d-n%d cut", nd[a].id, nd[b].id);
	}
}

static void
msg_event(void)
{
	int			i,
				t,
				r,
				acc;
	i64			mark;
	Msg			m;

	if (nmsg == 0)
		return;
	i = rnd(nmsg);
	m = msgs[i];
	t = slot_of(m.to);
	if (t >= 0 && !nd[t].up && chance(0.5))
		return;
	if (t < 0 || !nd[t].up || chance(0.25))
	{
		note(1, "  %s to n%d from %s: lost in the network", msg_names[m.kind], m.to, m.from);
		msgs[i] = msgs[--nmsg];
		return;
	}
	r = apply(t, &m, &mark, &acc);
	if (r == R_WAIT)
		return;
	st.delivered++;
	note(1, "  %s to n%d from %s: arrives late, %s (node now epoch %lld hwm %lld)",
		 msg_names[m.kind], m.to, m.from, acc ? "done" : "refused",
		 (long long) nd[t].epoch, (long long) nd[t].hwm);
	msgs[i] = msgs[--nmsg];
}

static void
agent_crash_event(void)
{
	int			k = rnd(K);

	if (ag[k].on)
	{
		ag[k].on = 0;
		st.agent_crash++;
		note(1, "agent#%ld on n%d dies (phase %d)", ag[k].no, ag[k].id, ag[k].ph);
	}
}

static void
prop_crash_event(void)
{
	int			j = rnd(NP);

	if (pr[j].on && !pr[j].dormant)
		prop_die(&pr[j], "its proposer died");
}

/*
 * A removed machine that no other node lists is wiped and comes back as a
 * fresh node with a new identity (its windows stay on record).
 */
static void
wipe_event(void)
{
	int			s = rnd(N),
				others = 0;

	if (!nd[s].joined || prop_on(s))
		return;
	for (int t = 0; t < N; t++)
	{
		if (t == s)
			continue;
		if (set_has(&nd[t].mem, nd[s].id))
			return;
		if (nd[t].joined && in_own_view(t))
			others++;
	}
	if (others == 0)
		return;
	kill_node_work(s, "wiped");
	note(1, "n%d is wiped and comes back fresh as n%d", nd[s].id, nids);
	idslot[nd[s].id] = -1;
	memset(&nd[s], 0, sizeof nd[s]);
	nd[s].id = new_id(s);
	nd[s].up = 1;
	nd[s].lock = -1;
	nd[s].prop = -1;
	nd[s].mem.n = 1;
	nd[s].mem.v[0] = nd[s].id;
	nd[s].has_seq = BRIEF;
	for (int t = 0; t < N; t++)
		cut[s][t] = cut[t][s] = 0;
	st.wipes++;
}

/*
 * With the kept seeds, the members that had the sequence may all have been
 * removed: the user creates it again on a member, which starts from the
 * seed it kept.  (Without kept seeds a re-created sequence starts over: a
 * user's mistake, not the protocol's, so it is not modelled.)
 */
static void
recreate_event(void)
{
	int			cand[MAXN],
				nc = 0,
				s;

	if (!FIX(FX_MISSING))
		return;
	for (int i = 0; i < N; i++)
	{
		if (nd[i].has_seq && in_own_view(i))
			return;
		if (nd[i].up && nd[i].joined && !nd[i].pending && in_own_view(i))
			cand[nc++] = i;
	}
	if (nc == 0)
		return;
	s = cand[rnd(nc)];
	nd[s].has_seq = 1;
	note(1, "the sequence is created again on n%d, from its kept hwm %lld", nd[s].id,
		 (long long) nd[s].hwm);
}

/* ---- scripted counterexamples (--scenario=NAME): nodes a, b, c, d, e ---- */

static void
sc_agent(int s)
{
	Agent	   *a = &ag[0];

	step_no++;
	if (!agent_ok(s))
	{
		note(1, "(n%d cannot run an agent)", nd[s].id);
		return;
	}
	agent_begin(a, s);
	for (int i = 0; a->on && i < 100000; i++, step_no++)
		agent_step(a);
}

static void
sc_change(int s, int op, int t)
{
	Prop	   *p = &pr[0];
	int			tg = nd[t].id;

	step_no++;
	if (op == OP_REMOVE && !(opt_ops & 2))
	{
		note(1, "(n%d cannot remove n%d: removing a member is refused)", nd[s].id, tg);
		return;
	}
	if (!prop_ok(s))
	{
		note(1, "(n%d cannot run a change)", nd[s].id);
		return;
	}
	prop_begin(p, s, op, &tg, 1);
	for (int i = 0; p->on && i < 100000; i++, step_no++)
		prop_step(p);
}

/* "ab|c": cut every link between a, b and c */
static void
sc_cut(const char *spec)
{
	const char *bar = strchr(spec, '|');

	step_no++;
	for (const char *x = spec; x < bar; x++)
		for (const char *y = bar + 1; *y; y++)
			cut[*x - 'a'][*y - 'a'] = cut[*y - 'a'][*x - 'a'] = 1;
	note(1, "partition: %s", spec);
}

static void
sc_heal(void)
{
	step_no++;
	memset(cut, 0, sizeof cut);
	note(1, "network heals");
}

static int
scenario(const char *name)
{
	enum { A, B, C, D, E };

	/* a group of three that has windows, c up to date */
	if (strcmp(name, "twonode") != 0)
	{
		sc_change(A, OP_ADD, B);
		sc_agent(A);
		sc_change(A, OP_ADD, C);
		sc_agent(A);
	}
	if (strcmp(name, "twonode") == 0)
	{
		/* a and b, split: each removes the other, "down for good" */
		sc_change(A, OP_ADD, B);
		sc_agent(A);
		sc_cut("a|b");
		sc_change(A, OP_REMOVE, B);
		sc_change(B, OP_REMOVE, A);
		sc_agent(A);
		sc_agent(B);
	}
	else if (strcmp(name, "shrink") == 0)
	{
		/* a wins on {a, b} while c is cut off; then a and b are removed */
		sc_cut("c|ab");
		sc_agent(A);
		sc_heal();
		sc_change(B, OP_REMOVE, A);
		sc_change(C, OP_REMOVE, B);
		sc_agent(C);
	}
	else if (strcmp(name, "shrink5") == 0)
	{
		/* five members; a wins on {a, b, c}; a and b are removed; c cut off */
		sc_change(A, OP_ADD, D);
		sc_agent(A);
		sc_change(A, OP_ADD, E);
		sc_agent(A);
		sc_cut("de|abc");
		sc_agent(A);
		sc_heal();
		sc_change(C, OP_REMOVE, A);
		sc_change(C, OP_REMOVE, B);
		sc_cut("c|de");
		sc_agent(D);
	}
	else if (strcmp(name, "joiners") == 0)
	{
		/* a wins on {a, b} while c is cut off; d and e join; a, b cut off */
		sc_cut("c|ab");
		sc_agent(A);
		sc_heal();
		sc_change(A, OP_ADD, D);
		sc_change(A, OP_ADD, E);
		sc_cut("ab|cde");
		sc_agent(C);
	}
	else
		return -1;
	return 0;
}

/* ---- the scheduler ---- */

/*
 * What happens in a step, with weights out of 1000.  With --vary, each
 * cluster runs with its own mix: agents rare or frequent, changes slow or
 * fast, the network calm or stormy, nodes solid or crashing, reads timing
 * out often or not; and half the clusters run "coarse": an agent attempt or
 * a change runs whole in one step, faults coming only between them, which
 * reaches states of who knows which mark (two joins with no agent between)
 * far more often than interleaving every call.
 */
enum { EV_AGENT, EV_PROP, EV_MSG, EV_CRASH, EV_AGSTEP, EV_NET, EV_INLINE, EV_REPAIR,
	EV_AGCRASH, EV_PRCRASH, EV_PRSTEP, EV_WIPE, EV_RECREATE, EV_AGSTEP2, EV_COUNT };
static const int wdefault[EV_COUNT] = {600, 200, 40, 10, 5, 30, 30, 20, 10, 3, 2, 4, 1, 45};
static int	weight[EV_COUNT];
static int	wsum = 1000;
static int	coarse;				/* agents and changes run whole, one a step */

static void
draw_mix(void)
{
	static const int agent_w[] = {600, 600, 200, 60, 20};
	static const int prop_w[] = {200, 200, 500, 1000};
	static const int net_w[] = {30, 30, 120, 400};
	static const int crash_w[] = {10, 10, 40};

	memcpy(weight, wdefault, sizeof weight);
	coarse = 0;
	if (opt_vary > 0)
	{
		coarse = chance(0.5);
		weight[EV_AGENT] = agent_w[rnd(5)];
		weight[EV_AGSTEP2] = weight[EV_AGENT] / 13;
		weight[EV_PROP] = prop_w[rnd(4)];
		weight[EV_NET] = net_w[rnd(4)];
		weight[EV_CRASH] = crash_w[rnd(3)];
		weight[EV_MSG] = chance(0.5) ? 40 : 150;
		p_read = chance(0.5) ? p_anom : chance(0.5) ? 0.15 : 0.4;
		if (chance(0.5))
			for (int i = 0; i < N; i++)
				for (int j = 0; j < i; j++)
					flaky[i][j] = flaky[j][i] = chance(0.25);
		note(1, "mix: agents %d changes %d network %d crashes %d late calls %d reads failing %.2f%s",
			 weight[EV_AGENT], weight[EV_PROP], weight[EV_NET], weight[EV_CRASH],
			 weight[EV_MSG], p_read, coarse ? ", coarse" : "");
	}
	wsum = 0;
	for (int e = 0; e < EV_COUNT; e++)
		wsum += weight[e];
}

static void
event(int r)
{
	int			e = 0;

	while (e < EV_COUNT - 1 && r >= weight[e])
		r -= weight[e++];
	switch (e)
	{
		case EV_AGENT:
			{
				Agent	   *a = &ag[rnd(K)];

				if (a->on)
					agent_step(a);
				else
				{
					agent_start(a);
					for (int i = 0; coarse && a->on && i < 1000; i++, step_no++)
						agent_step(a);
				}
			}
			break;
		case EV_PROP:
			{
				Prop	   *p = &pr[rnd(NP)];

				if (p->on)
					prop_step(p);
				else if (coarse || chance(0.05))
				{
					prop_start(p);
					for (int i = 0; coarse && p->on && i < 1000; i++, step_no++)
						prop_step(p);
				}
			}
			break;
		case EV_MSG:
			msg_event();
			break;
		case EV_CRASH:
			if (chance(fscale))
				crash_event();
			break;
		case EV_NET:
			if (chance(fscale))
				net_event();
			break;
		case EV_INLINE:
			inline_event();
			break;
		case EV_REPAIR:
			repair_event();
			break;
		case EV_AGCRASH:
			agent_crash_event();
			break;
		case EV_PRCRASH:
			prop_crash_event();
			break;
		case EV_PRSTEP:
			{
				Prop	   *p = &pr[rnd(NP)];

				if (p->on)
					prop_step(p);
			}
			break;
		case EV_WIPE:
			wipe_event();
			break;
		case EV_RECREATE:
			recreate_event();
			break;
		default:				/* EV_AGSTEP, EV_AGSTEP2 */
			{
				Agent	   *a = &ag[rnd(K)];

				if (a->on)
					agent_step(a);
			}
			break;
	}
}

/* ---- main ---- */

/*
 * A new cluster: N fresh nodes, the sequence created on the first, nothing
 * in the network, no window on record (the windows of an earlier cluster
 * belong to another group).
 */
static void
cluster_init(void)
{
	memset(nd, 0, sizeof nd);
	memset(ag, 0, sizeof ag);
	memset(pr, 0, sizeof pr);
	memset(cut, 0, sizeof cut);
	memset(flaky, 0, sizeof flaky);
	nids = 0;
	nwin = 0;
	nmsg = 0;
	burst_until = 0;
	for (int s = 0; s < N; s++)
	{
		nd[s].id = new_id(s);
		nd[s].up = 1;
		nd[s].lock = -1;
		nd[s].prop = -1;
		nd[s].mem.n = 1;
		nd[s].mem.v[0] = nd[s].id;
		nd[s].has_seq = BRIEF;	/* brief: every node has a mark */
	}
	/* the seed node: the sequence is created there, then peers join */
	nd[0].joined = 1;
	nd[0].has_seq = 1;
	st.clusters++;
	st.last_change = step_no;
	draw_mix();
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: allocator_sim [--seed=S] [--nodes=N (1..%d)] [--steps=T] [--agents=K (1..%d)]\n"
			"                     [--proposers=P (1..%d)] [--proto=impl|fixed|brief]\n"
			"                     [--fix=quorum,seed,missing,resume (on top of impl)]\n"
			"                     [--broken=noepoch|nocas|noseed|allatonce|noquorum|nopending]\n"
			"                     [--changes=both|add|remove|add,remove] [--restart=STEPS] [--vary[=0|1]]\n"
			"                     [--trace[=1|2]] [--show=LINES] [--dump]\n"
			"       allocator_sim --scenario=twonode|shrink|shrink5|joiners [--proto=...] [--fix=...]\n", MAXN, MAXAGENTS, MAXPROP);
	exit(2);
}

static const char *
optval(const char *arg, const char *name)
{
	size_t		l = strlen(name);

	if (strncmp(arg, name, l) == 0 && arg[l] == '=')
		return arg + l + 1;
	return NULL;
}

int
main(int argc, char **argv)
{
	const char *v;
	int			members_max = 0;
	int			proto_given = 0;
	int			full = 0;		/* the first node's membership has every node */

	for (int i = 1; i < argc; i++)
	{
		if ((v = optval(argv[i], "--seed")))
			opt_seed = strtoull(v, NULL, 10);
		else if ((v = optval(argv[i], "--nodes")))
			N = atoi(v);
		else if ((v = optval(argv[i], "--steps")))
			nsteps = atol(v);
		else if ((v = optval(argv[i], "--agents")))
			K = atoi(v);
		else if ((v = optval(argv[i], "--proposers")))
			NP = atoi(v);
		else if ((v = optval(argv[i], "--show")))
			show_lines = atoi(v);
		else if ((v = optval(argv[i], "--trace")))
			trace_level = atoi(v);
		else if (strcmp(argv[i], "--trace") == 0)
			trace_level = 1;
		else if (strcmp(argv[i], "--dump") == 0)
			opt_dump = 1;
		else if ((v = optval(argv[i], "--scenario")))
			opt_scenario = v;
		else if ((v = optval(argv[i], "--changes")))
		{
			opt_ops = strcmp(v, "add") == 0 ? 1 : strcmp(v, "remove") == 0 ? 2 :
				strcmp(v, "both") == 0 || strcmp(v, "add,remove") == 0 ||
				strcmp(v, "remove,add") == 0 ? 3 : 0;
			if (!opt_ops)
				usage();
		}
		else if ((v = optval(argv[i], "--restart")))
			opt_restart = atol(v);
		else if ((v = optval(argv[i], "--vary")))
			opt_vary = atoi(v);
		else if (strcmp(argv[i], "--vary") == 0)
			opt_vary = 1;
		else if ((v = optval(argv[i], "--proto")))
		{
			proto_given = 1;
			proto = -1;
			for (int k = 0; k < 3; k++)
				if (strcmp(v, proto_names[k]) == 0)
					proto = k;
			if (proto < 0)
				usage();
		}
		else if ((v = optval(argv[i], "--fix")))
		{
			char		buf[200];

			snprintf(buf, sizeof buf, "%s", v);
			for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ","))
			{
				int			f = -1;

				for (int k = 0; k < NFIXES; k++)
					if (strcmp(tok, fix_names[k]) == 0)
						f = k;
				if (f < 0)
					usage();
				fixes |= 1 << f;
			}
		}
		else if ((v = optval(argv[i], "--broken")))
		{
			brk = -1;
			for (int k = 0; k < BRK_COUNT; k++)
				if (strcmp(v, brk_names[k]) == 0)
					brk = k;
			if (brk < 0)
				usage();
		}
		else
			usage();
	}
	if (N < 1 || N > MAXN || K < 1 || K > MAXAGENTS || NP < 1 || NP > MAXPROP ||
		nsteps < 0 || show_lines < 1 || show_lines > RING)
		usage();
	if (opt_scenario && N < 5)
		N = 5;					/* nodes a to e */
	/* a broken variant is one mechanism less in the fixed protocol, or in impl */
	if (brk != BRK_NONE && !(proto_given && proto == PROTO_IMPL))
		proto = PROTO_FIXED;
	if (proto == PROTO_IMPL && (brk == BRK_NOQUORUM || brk == BRK_NOPENDING))
		usage();				/* mechanisms impl does not have */
	if (opt_ops == 0)
		opt_ops = proto == PROTO_IMPL ? 1 : 3;
	/* adds only: a group that a failed change wedged stays so; start anew */
	if (opt_restart < 0)
		opt_restart = opt_ops == 1 ? 5000 + 100L * N : 0;
	if (opt_vary < 0)
		opt_vary = opt_restart > 0;
	if (proto == PROTO_FIXED)
	{
		fixes = FX_ALL;
		if (brk == BRK_NOQUORUM)
			fixes &= ~FX_QUORUM;
	}
	if (BRIEF && (fixes & ~FX_QUORUM))
		usage();				/* the brief's protocol takes the quorum fix only */

	{
		u64			x = opt_seed * 0x2545f4914f6cdd1dULL + (u64) N * 1000003u + (u64) K;

		for (int i = 0; i < 4; i++)
			rs[i] = splitmix(&x);
	}
	ring = calloc(RING, LINE);
	if (!ring)
		abort();
	/* a change of n members needs about n calls to go through */
	p_anom = N <= 10 ? 0.02 : 0.2 / N;
	p_read = p_anom;
	fscale = N <= 7 ? 1.0 : 7.0 / N;

	cluster_init();

	if (opt_scenario)
	{
		/* no faults but the scripted ones, every event shown */
		p_anom = p_read = 0;
		if (scenario(opt_scenario) < 0)
			usage();
		for (long i = ring_n > RING ? ring_n - RING : 0; i < ring_n; i++)
			printf("%s\n", ring[i % RING]);
		dump_nodes();
		config_line(stdout);
		printf(": no violation\n");
		return 0;
	}

	for (step_no = 1; step_no <= nsteps; step_no++)
	{
		int			r = rnd(wsum);

		if (opt_restart > 0)
		{
			/* shorter when every node is a member: nothing is left to add */
			long		limit = coarse ? opt_restart / 4 : opt_restart;

			if (full && limit > 1000 + 10L * N)
				limit = 1000 + 10L * N;
			if (step_no - st.last_change > limit)
			{
				note(1, "no change done in %ld steps: cluster %ld starts, all nodes fresh",
					 limit, st.clusters + 1);
				cluster_init();
				full = 0;
			}
		}

		if (!coarse && step_no < burst_until && chance(0.9))
		{
			Prop	   *p = &pr[rnd(NP)];

			if (p->on)
				prop_step(p);
			else
				prop_start(p);
		}
		else
			event(r);
		for (int s = 0; s < N; s++)
			if (nd[s].joined && in_own_view(s) && nd[s].mem.n > members_max)
				members_max = nd[s].mem.n;
		full = nd[0].mem.n == N && nd[0].lock < 0;
	}

	if (opt_dump)
		dump_nodes();
	config_line(stdout);
	printf(": windows=%ld (inline %ld) attempts=%ld lost=%ld no-majority=%ld agent-deaths=%ld"
		   " | changes ok=%ld failed=%ld (revert failures %ld, adopt failures %ld, seed failures %ld,"
		   " proposer deaths %ld, repairs %ld) largest membership %d"
		   " | crashes=%ld wipes=%ld delayed=%ld late=%ld lost-replies=%ld clusters=%ld: OK\n",
		   st.windows + st.inl, st.inl, st.attempts, st.lost, st.nomaj, st.agent_crash,
		   st.ch_ok, st.ch_fail, st.revert_fail, st.adopt_fail, st.seed_fail, st.prop_crash,
		   st.repairs, members_max, st.crashes, st.wipes, st.delayed, st.delivered,
		   st.lost_replies, st.clusters);
	return 0;
}
