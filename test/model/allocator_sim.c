/*
 * allocator_sim.c -- a randomized model checker for distseq's window
 * allocator and its membership changes (src/agent.c, src/member.c,
 * src/change.c, src/settle.c, src/windows.c; DESIGN-NOTES.md sections 2
 * and 3).
 *
 * Every agent attempt, membership change, phase two and recovery is a state
 * machine that makes one call per step; between any two steps anything else
 * may happen: other agents, other changes, node crashes and recoveries,
 * partitions of random subsets, single links cut or healed, a reply lost
 * after the callee applied the call, a request held in the network and
 * applied much later (a call that timed out but that the server still runs),
 * an agent or a change dying half way with its worker, a removed machine
 * wiped and coming back as a fresh node.  It checks that no two windows ever
 * overlap and that no node's high-water mark ever goes down, and prints the
 * trace that led to the first violation.  One sequence is modelled; it is
 * created on the seed node (n0).  Other fresh nodes may have a sequence of
 * the same name of their own (--own): its windows count once the node joins
 * a group, as its values are then the group's.  Calls go to a node's
 * address (its peer entry's server): a machine wiped and reinstalled keeps
 * its address, so a call meant for its old node id reaches the new node.
 *
 * The protocol is the code's (e93a7f3, version 1.4, with the changes of
 * cfeb8eb, 2564abe, 4c3967b and c772f3e):
 *
 *   node      epoch, epoch_id, members, pending, proposer, prev_* (the
 *             membership before the pending one); the sequence's hwm (at
 *             least the top of its highest window), or without the sequence
 *             the seed it keeps (distseq_seed).  A fresh node is (0, 0), alone.
 *   agent     only on a node that is in its own members and not pending
 *             (agent_check_member), whose membership is not a fresh node's
 *             (distseq_has_peers: epoch > 0 or more than one member; a fresh
 *             node with the sequence allocates inline, alone, atomically).
 *             Reads every member (a member in the same (epoch, epoch_id) is
 *             read, pending or not; one lacking the sequence answers with its
 *             seed), introduces the sequence where it lacks (created at the
 *             larger of the mark read and its seed), CAS `hwm <= M -> M + X`
 *             naming (epoch, epoch_id) on each member (refused when pending or
 *             in another membership), this node last with the window in the
 *             same transaction; wins with a majority of its members.
 *   change    by a proposer p, one at a time per node (one worker; a lock
 *             on distseq_change).  One transaction T1 on p: first phase two
 *             of p's unfinished change, if any (as below; its errors only
 *             logged, in a subtransaction); what it writes on p is seen by
 *             T1 only until T1 commits, and p's node row, once T1 read it FOR
 *             SHARE or wrote it, makes other calls on it wait (see apply).
 *             Then p's state read again: pending, the change fails.  Phase
 *             one: add a fresh node or remove a member other than p (a target
 *             that is already a member, or no member, is no change).  An add
 *             looks at the node at the joiner's address (its id, fresh?),
 *             then calls distseq_peer_join on it first, naming its node id:
 *             the node of that id moves to E1 pending, prev_* = (0, 0), only
 *             if fresh (no-op if already pending in E1 from p, from (0, 0));
 *             else T1 fails, nothing moved.  It is one of the moved nodes,
 *             but no vote.  epoch_cas on every member of p's membership E0
 *             but p, the removed one too, naming the member's node id (moves
 *             the node of that id, active in E0, to E1 pending, prev_* = E0;
 *             the node of that id already pending in E1 from p, come from
 *             E0, is left as it is: the same step again; another node at the
 *             address refuses); with moves + 1 >= |E0|/2+1, p moves
 *             itself, marks its earlier unfinished change row finished
 *             (superseded: forgets its removed peers), inserts the row of
 *             this change, and commits: decided.  Otherwise it reverts the
 *             ones it saw move (best effort) and aborts.  T1 dies with p's
 *             worker.  Phase two, right after and at every pass of p while
 *             the row is unfinished: if p is no longer in E1 (a later change
 *             of another node moved it on), the row is finished and that is
 *             all.  Otherwise marks from every node of prev_members that is
 *             in E1 (pending or not); with at least |prev| - quorum + 1 of
 *             them, activate every member of E1, p last: accepted only by the
 *             node of the id meant (a machine reinstalled at the address has
 *             another), and only if it is in E1, or in E0 = prev (pending or
 *             not) with E0's epoch > 0 (a joiner is in E1 since phase one).
 *             Activation sets E1 active and raises the
 *             mark (and the seed); all accepted: the row is finished, and
 *             the peer entries of the nodes of prev_members not in members
 *             are deleted (a removed member is reachable until then).  An
 *             error in phase two (p moved on while it ran) is logged: the
 *             pass goes on with the recovery and the agent.
 *   recovery  at every pass of a node v pending in a change of another
 *             proposer q, which it took in round 0 (below): ask q whether
 *             the change was decided (waits for a T1 in flight on q); not
 *             decided: v goes back to prev_*.  Only the node q answers:
 *             another node at q's address (q wiped and reinstalled) refuses,
 *             and v waits (for good, if q is gone: then a member settles
 *             the change, below).
 *   settle    (1.7) any member r of a membership E0 (active in it, or
 *             pending from it) settles the change from E0: finishes the one
 *             that may have been decided, or abandons them all for a no-op
 *             change; see "Settling a change" below.
 *
 * Settling a change (1.7, distseq_settle_run; the recovery of a change
 * whose proposer is lost).  Changes from one membership E0 form one
 * instance of consensus: at most one of them is ever decided (the model
 * checks it: "two changes decided from membership ...").  The phase one
 * above is round 0 of it: moves that need no promise, each node taking at
 * most one change at a time, and the proposer deciding alone.  A recovery
 * runs the two rounds of Paxos on the members of E0, with a ballot
 * (round >= 1, node id) above every one it saw:
 *
 *   node      two more columns: promised, the highest ballot it promised
 *             in the instance it is in (of E0 while active in E0 or
 *             pending from it); accepted, the ballot at which it took its
 *             pending change (0: round 0).  Both go back to 0 when it is
 *             activated in a new membership (not when phase two activates
 *             it again in the one it is in: what it promised holds).
 *   round 0   a move (epoch_cas, the proposer's own move) is refused by a
 *             node that promised any ballot; so is the repeated step.  A
 *             revert (the proposer's, or at a pass after asking the
 *             proposer) undoes only a change taken in round 0.
 *   prepare   distseq_peer_prepare(E0, ballot, node meant), on every member
 *             of E0 (its own promise committed on its own): a node in the
 *             instance of E0 with promised < ballot sets promised = ballot
 *             and answers with its pending change and accepted ballot, if
 *             any (a promise); one active in a membership of epoch E0 + 1
 *             answers with it (that change was decided); any other refuses
 *             (with its promise: the next try goes higher).
 *   choose    a member active after E0: its change (decided; no accept
 *             round, this node just takes it, pending).  Otherwise fewer
 *             than a majority of E0 promised: stop, nothing done.  Else:
 *             the change of the highest accepted ballot >= 1 among the
 *             promises, if any (Paxos); else each change X of round 0
 *             among them may have been decided only if
 *                 (promises holding X) + (members of E0 that did not promise)
 *                 >= majority of E0
 *             (each node holds one change of round 0 at a time, drops it
 *             only when it cannot be decided, and once it promised takes
 *             no other): one such X, take it; none: a no-op change (the
 *             members of E0, epoch E0 + 1, a new epoch_id) abandons them
 *             all; two: stop.  A change that leaves this node out is left
 *             to a member that stays.
 *   accept    distseq_peer_join on the joiners of the change (best effort:
 *             one that went back joins again if still fresh), then
 *             distseq_peer_accept(E0, ballot, change, node meant) on every
 *             other member of E0: a node in the instance of E0 with
 *             promised <= ballot takes the change, pending (prev_* = E0 if
 *             it was active in E0), accepted = promised = ballot, proposer
 *             = r.  With this node's own accept, at least a majority of
 *             E0: this node takes it and records the change row in one
 *             transaction (decided; an older unfinished row is finished),
 *             then phase two as a proposer's.  Else stop: no revert (a
 *             change taken at a ballot >= 1 is only ever replaced by a
 *             higher ballot's).
 *   activate  also takes a node pending from E0 in another change from E0
 *             (one abandoned: never decided, as this one was).
 *
 * Why it is safe: a change decided in round 0 was held by a majority of
 * E0 (its proposer included) when it was decided, and none of them drops
 * it; each promise quorum meets that majority in a node that took it
 * before promising, so the count above keeps it, and a second change of
 * round 0 cannot pass the count too without the stop.  A change decided at
 * a ballot >= 1 is held at that ballot or above by a majority: Paxos.  A
 * proposer that promised cannot decide in round 0 any more, and nodes
 * that promised refuse its moves, so what the count saw is all it can get.
 *
 * --broken=X takes one mechanism out, to show that the checker catches it:
 *   noepoch     the agent ignores the membership epoch (its reads, the CAS)
 *   nocas       the hwm CAS ignores hwm <= M
 *   nopending   pending nodes take part: they accept CASes and run agents
 *   noquorum    phase one decides whatever the number of moves
 *   fewmarks    phase two goes on with marks from one node
 *   anyepoch    activation is accepted from any membership (caught when a
 *               node with windows of its own sequence is taken in)
 *   nofreshcheck  distseq_peer_join moves the joiner without checking that
 *               it is fresh (change_add's look at it stays): a joiner that
 *               opened a window of its own after that look joins with it
 *               (scenario freshrace).  (Activation from (0, 0), the check
 *               that 4c3967b removed, can no longer take anyone: a joiner is
 *               never back at (0, 0) once its change is decided.)
 *   noidcheck   activation does not check the node id it names (the code
 *               before cfeb8eb).  Since 4c3967b a machine reinstalled at a
 *               member's address is at (0, 0), which activation refuses
 *               anyway, so scenario reinstall no longer catches it, nor any
 *               run since c772f3e; so it is not in run.sh's list
 *   nomovefrom  epoch_cas as before c772f3e: neither the move nor "the same
 *               step again" checks the node id, nor where the node came
 *               from; a node reinstalled at a member's address, added, then
 *               counts as that member's vote (scenario rejoin)
 *   nodecidedid distseq_peer_decided answers whatever node is at the
 *               proposer's address (before c772f3e): a node pending in a
 *               decided change goes back to its old membership when the
 *               proposer was wiped.  No run has caught it alone (like
 *               blindrevert, below), nor nomovefrom alone in random runs;
 *               the code before c772f3e, with both, fails most random
 *               runs.  Not in run.sh's list
 *   blindrevert recovery reverts without asking the proposer (no run has
 *               caught it: a reverted member keeps its hwm, and the
 *               majorities of two memberships one change apart share a
 *               node; so it is not in run.sh's list)
 *   inlinealone a node whose membership has one member allocates inline (the
 *               rule of 1.3: a removed node, or the last member, alone)
 *   recnoquorum settling goes on with fewer than a majority of promises
 *               (finish or abandon without reading a majority; scenario
 *               splitprepare)
 *   recnopromise prepares bind no one: promises are not kept, moves of
 *               round 0 and accepts ignore them (abandon without a higher
 *               ballot; scenario lateproposer, and random runs)
 *
 * --norecovery: no member settles a change (the code before 1.7), and
 * activation does not take a node pending in an abandoned change: the
 * scenarios lost1-lost4 then end stuck.
 *
 * --raisepromise: as change_settle does, a recovery that fails after a
 * prepare was refused for a round at least its own raises this node's
 * promise to (that round, 0), whatever instance the node is in by then
 * (the UPDATE checks no membership).  It only makes the node refuse more;
 * the model's seenbal alone is a hint.  Random runs with it pass.
 *
 * Activation is accepted from any older epoch > 0 (a member left behind
 * two changes or more is taken in); this was proposed here as --older and
 * is now the code, so --older is the default and changes nothing.
 *
 * --scenario=NAME replays a scripted history, with no other event (see
 * scenario() below): twonode, shrink, shrink5, joiners, fewmarks,
 * superseded, freshrace, reinstall, behind, rejoin, lost0-lost4,
 * splitprepare, lateproposer.
 *
 * In random runs a member settles the change from its membership at 8% of
 * the changes started, racing live proposers, agents and faults as they
 * do.  A group can still get stuck (a joiner of an abandoned change waits
 * for its lost proposer; all members of a group wiped...), so runs
 * (--restart=STEPS) start a new cluster of fresh nodes when no change was
 * done for a while, and (--vary) give each cluster its own mix of events,
 * see draw_mix().  How often a listed member was not active in the newest
 * membership at a restart is reported ("stuck"), with why (group_stuck()).
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
#define MAXPRIV		8			/* windows of a fresh node's own sequence */
#define MAXMSG		64			/* requests held in the network */
#define RING		4096		/* trace lines kept for a violation */
#define LINE		256

enum { BRK_NONE, BRK_NOEPOCH, BRK_NOCAS, BRK_NOPENDING, BRK_NOQUORUM, BRK_FEWMARKS,
	BRK_ANYEPOCH, BRK_BLINDREVERT, BRK_INLINEALONE, BRK_NOFRESHCHECK, BRK_NOIDCHECK,
	BRK_NOMOVEFROM, BRK_NODECIDEDID, BRK_RECNOQUORUM, BRK_RECNOPROMISE, BRK_COUNT };
static const char *brk_names[] = {"none", "noepoch", "nocas", "nopending", "noquorum",
	"fewmarks", "anyepoch", "blindrevert", "inlinealone", "nofreshcheck", "noidcheck",
	"nomovefrom", "nodecidedid", "recnoquorum", "recnopromise"};

/* options */
static u64	opt_seed = 1;
static int	N = 5;
static long nsteps = 100000;
static int	K = 4;				/* concurrent agents (one per node at most) */
static int	NP = 2;				/* concurrent membership changes */
static int	brk = BRK_NONE;
static int	trace_level = 0;
static int	show_lines = 120;
static int	opt_dump = 0;
static int	opt_ops = 3;		/* 1: adds only, 2: removes only, 3: both */
static long opt_restart = -1;	/* a new cluster after so many steps with no
								 * change done (0: never; -1: the default) */
static int	opt_vary = -1;		/* a mix of events per cluster (-1: when they restart) */
static int	opt_own = -1;		/* fresh nodes may have the sequence (-1: with --vary) */
static int	opt_older = 1;		/* activation from any older epoch > 0 (the code) */
static int	opt_norec = 0;		/* no recovery: the code before 1.7 */
static int	opt_raise = 0;		/* a failed recovery raises its own promise (C) */
static const char *opt_scenario;
static double p_anom;			/* per call: reply lost, or request delayed */
static double p_read;			/* per agent read: it times out */
static double p_own;			/* a fresh node has a sequence of its own */
static double fscale;			/* crashes and partitions: rarer in large groups */

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

/* a row of distseq_change, on its proposer */
typedef struct
{
	i64			E,
				pE;
	u64			id,
				pid;
	Set			mem,
				pmem;
} Change;

typedef struct
{
	int			id;				/* identity; a wiped machine gets a new one */
	int			up;
	int			joined;			/* the seed node, or activated in a group */
	int			has_seq;
	int			nwin;			/* windows made here */
	i64			hwm;			/* without the sequence: the seed kept (0: none) */
	i64			epoch;
	u64			eid;
	Set			mem;
	int			pending;
	int			prop;			/* proposer of the pending membership */
	i64			pepoch;
	u64			peid;
	Set			pmem;
	int			chg;			/* has an unfinished change row: ch */
	Change		ch;
	Set			forgot;			/* peer entries deleted (removed members) */
	int			t1;				/* a phase one in flight: the change lock is held */
	int			job;			/* the worker's job running here, -1 for none */
	int			npriv;			/* windows of its own sequence, before joining */
	i64			priv[MAXPRIV][2];
	i64			promised;		/* recovery ballot promised in this instance (0: none) */
	i64			bal;			/* pending: ballot it accepted at (0: round 0) */
	i64			seenbal;		/* largest ballot seen refused (a hint) */
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

/* distseq_has_peers: ever in a group (broken=inlinealone: 1.3's rule) */
static int
has_peers(int s)
{
	if (brk == BRK_INLINEALONE)
		return nd[s].mem.n > 1;
	return nd[s].epoch > 0 || nd[s].mem.n > 1;
}

/* fresh, as change_add and distseq_peer_join check it */
static int
is_fresh(const Node *n)
{
	return n->epoch == 0 && !n->pending && n->mem.n == 1 &&
		n->mem.v[0] == n->id && n->nwin == 0;
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
		printf("  n%-4d %-4s %s%s%s epoch %-12s hwm %-8lld windows %-4d members %s%s\n",
			   nd[s].id, nd[s].up ? "up" : "DOWN", nd[s].joined ? "joined" : "fresh ",
			   nd[s].has_seq ? " seq" : " ---", nd[s].pending ? " PENDING" : "",
			   epstr(nd[s].epoch, nd[s].eid, b1), (long long) nd[s].hwm, nd[s].nwin,
			   set_str(&nd[s].mem, b2, sizeof b2), nd[s].chg ? " (change unfinished)" : "");
}

static void
config_line(FILE *f)
{
	if (opt_scenario)
		fprintf(f, "scenario=%s", opt_scenario);
	else
		fprintf(f, "seed=%llu nodes=%d steps=%ld agents=%d", (unsigned long long) opt_seed,
				N, nsteps, K);
	if (brk)
		fprintf(f, " broken=%s", brk_names[brk]);
	if (opt_older)
		fprintf(f, " older");
	if (opt_norec)
		fprintf(f, " norecovery");
	fprintf(f, " changes=%s", opt_ops == 1 ? "add" : opt_ops == 2 ? "remove" : "both");
	if (!opt_scenario && opt_restart > 0)
		fprintf(f, " restart=%ld", opt_restart);
	if (!opt_scenario && opt_vary > 0)
		fprintf(f, " vary");
	if (!opt_scenario && opt_own > 0)
		fprintf(f, " own");
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
	long		ch_start, ch_ok, ch_fail, revert_fail, prop_crash;
	long		p2_runs, p2_done, p2_fewmarks, p2_actfail, p2_errors, p2_superseded, recovered, reverted;
	long		rec_start, rec_known, rec_finish, rec_noop, rec_fail;
	long		crashes, wipes, delayed, delivered, lost_replies, waits, joined_own;
	long		clusters, stuck, last_change;	/* the step of the last change decided */
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
set_hwm_n(Node *n, i64 v)
{
	if (v < n->hwm)
		violation("hwm of n%d would go down from %lld to %lld", n->id,
				  (long long) n->hwm, (long long) v);
	n->hwm = v;
}

static void
set_hwm(int s, i64 v)
{
	set_hwm_n(&nd[s], v);
}

/* a window of the group's sequence: checked against every other one */
static void
record_window(int s, i64 lo, i64 hi, const char *how)
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
}

/*
 * A window made on node s.  A fresh node that never joined keeps the windows
 * of its own sequence to itself until it joins a group.
 */
static void
add_window(int s, i64 lo, i64 hi, const char *how)
{
	nd[s].nwin++;
	set_hwm(s, nd[s].hwm > hi ? nd[s].hwm : hi);
	if (!nd[s].joined)
	{
		if (nd[s].npriv < MAXPRIV)
		{
			nd[s].priv[nd[s].npriv][0] = lo;
			nd[s].priv[nd[s].npriv][1] = hi;
			nd[s].npriv++;
		}
		return;
	}
	record_window(s, lo, hi, how);
}

/* a node joins a group: the windows of its own sequence are the group's now */
static void
join_group(int s, const char *how)
{
	char		buf[200];

	if (nd[s].joined)
		return;
	nd[s].joined = 1;
	if (nd[s].npriv > 0)
		st.joined_own++;
	for (int i = 0; i < nd[s].npriv; i++)
	{
		snprintf(buf, sizeof buf, "n%d alone, before it joined (%s)", nd[s].id, how);
		record_window(s, nd[s].priv[i][0], nd[s].priv[i][1], buf);
	}
	nd[s].npriv = 0;
}

/* ---- calls: one call on one node, atomic there ---- */

enum { M_CAS, M_EPOCH, M_REVERT, M_MARKS, M_ACT, M_DECIDED, M_INTRO, M_JOIN, M_PREP, M_ACC };
static const char *msg_names[] = {"cas", "epoch-cas", "revert", "marks", "activate",
	"decided", "introduce", "join", "prepare", "accept"};

typedef struct
{
	int			kind, to;
	i64			E, E2, M, nh, mark, b;
	u64			Eid, id2;
	int			prop;
	Set			set;
	char		from[40];
} Msg;

static Msg	msgs[MAXMSG];
static int	nmsg;

enum { R_FAIL, R_OK, R_WAIT };

/* the proposers' logs: the changes decided, by (proposer, epoch_id) */
typedef struct
{
	int			prop;
	u64			id;
	i64			pE;
	u64			pid;
} Decided;
static Decided *decided;
static int	ndecided, capdecided;

/*
 * A change decided (by its proposer, or by a recovery).  Agreement: of the
 * changes proposed from one membership, one at most is ever decided (the
 * same change may be decided twice: by its proposer and by a recovery).
 */
static void
log_decided(int prop, u64 id, i64 pE, u64 pid)
{
	char		b1[32],
				b2[32],
				b3[32];

	for (int i = 0; i < ndecided; i++)
		if (pE > 0 && decided[i].pE == pE && decided[i].pid == pid && decided[i].id != id)
			violation("two changes decided from membership %s: %s by n%d, and %s by n%d",
					  epstr(pE, pid, b1), epstr(pE + 1, decided[i].id, b2), decided[i].prop,
					  epstr(pE + 1, id, b3), prop);
	if (ndecided == capdecided)
	{
		capdecided = capdecided ? capdecided * 2 : 256;
		decided = realloc(decided, sizeof(Decided) * (size_t) capdecided);
		if (!decided)
			abort();
	}
	decided[ndecided].prop = prop;
	decided[ndecided].id = id;
	decided[ndecided].pE = pE;
	decided[ndecided].pid = pid;
	ndecided++;
}

static int
was_decided(int prop, u64 id)
{
	for (int i = ndecided - 1; i >= 0; i--)
		if (decided[i].id == id && decided[i].prop == prop)
			return 1;
	return 0;
}

/* activation (distseq_member_activate) accepted by node n? */
static int
act_ok(const Node *n, const Msg *m)
{
	/* WHERE n.node_id = $8: the node meant, not another at its address */
	if (n->id != m->to && brk != BRK_NOIDCHECK)
		return 0;
	if (brk == BRK_ANYEPOCH)
		return 1;
	if (n->epoch == m->E2 && n->eid == m->id2)
		return 1;
	/* the membership before, unless it is epoch 0: every fresh node's */
	if (n->epoch == m->E && n->eid == m->Eid && m->E > 0)
		return 1;
	/*
	 * pending from it, in another change proposed from it: that change is
	 * never decided, as this one is (recovery: a change abandoned)
	 */
	if (n->pending && n->pepoch == m->E && n->peid == m->Eid && m->E > 0 && !opt_norec)
		return 1;
	/* any older epoch but 0 (the code since --older was proposed) */
	if (opt_older && n->epoch > 0 && n->epoch < m->E2)
		return 1;
	return 0;
}

/*
 * Node n (slot s, or the copy of its row that a phase one in flight has
 * written, see t1_node) takes an active membership, with a mark (activation)
 */
static void
activate(Node *n, int s, i64 E, u64 id, const Set *mem, i64 mark, const char *how)
{
	/*
	 * A new instance: the change from this membership.  Not when it is
	 * active in it already (phase two again): what it promised holds.
	 */
	if (n->pending || n->epoch != E || n->eid != id)
	{
		n->promised = 0;
		n->bal = 0;
	}
	n->epoch = E;
	n->eid = id;
	n->mem = *mem;
	n->pending = 0;
	n->prop = -1;
	n->pepoch = 0;
	n->peid = 0;
	n->pmem.n = 0;
	if (mark > n->hwm)
		set_hwm_n(n, mark);
	join_group(s, how);
}

static int	row_lock(int s);

/* what distseq_peer_prepare answered, the last time it was applied */
enum { P_REFUSED, P_PROMISE, P_DECIDED };
static struct
{
	int			kind;
	i64			promised;		/* P_REFUSED: the ballot it promised */
	i64			bal;			/* P_PROMISE and pending: the ballot it accepted at */
	int			pending;
	i64			E;				/* the change it is pending in, or active in */
	u64			id;
	Set			mem;
}			prep;

/* in the instance of membership (E, id): active in it, or pending from it */
static int
in_instance(const Node *n, i64 E, u64 id)
{
	return (!n->pending && n->epoch == E && n->eid == id) ||
		(n->pending && n->pepoch == E && n->peid == id);
}

/*
 * Apply a call on node slot s.  R_WAIT when it must wait for a lock (decided
 * while a phase one holds the change lock there).  *acc: it did what was
 * asked; *res: what it returns (a mark; decided or not).
 */
static int
apply(int s, const Msg *m, i64 *res, int *acc)
{
	Node	   *n = &nd[s];
	char		b1[32],
				b2[32];
	int			lk = row_lock(s);

	*acc = 0;
	*res = -1;
	/*
	 * A phase one in flight here has written the node row (lk 2: a
	 * compare-and-set, the marks, every update of the row wait), or read it
	 * FOR SHARE (lk 1: updates of the row wait).  Plain reads see the row
	 * as committed.  (The model makes a sequence introduced here wait too.)
	 */
	if ((lk == 2 && m->kind != M_DECIDED) ||
		(lk == 1 && (m->kind == M_EPOCH || m->kind == M_REVERT || m->kind == M_ACT ||
					 m->kind == M_JOIN || m->kind == M_PREP || m->kind == M_ACC)))
		return R_WAIT;
	switch (m->kind)
	{
		case M_CAS:
			if (!n->has_seq)
				break;			/* UPDATE found no row */
			if (brk != BRK_NOEPOCH &&
				(n->epoch != m->E || n->eid != m->Eid || (n->pending && brk != BRK_NOPENDING)))
				break;
			if (brk != BRK_NOCAS && n->hwm > m->M)
				break;
			set_hwm(s, n->hwm > m->nh ? n->hwm : m->nh);
			*acc = 1;
			break;
		case M_EPOCH:
			/*
			 * The node meant (node_id = $7), the move and the no-op both.
			 * The same step again: a no-op, which keeps the way back, only
			 * for a node come from the E0 named (prev_* = E0).
			 * broken=nomovefrom: the code before c772f3e, which checks
			 * neither: a node at a member's address (reinstalled, then a
			 * joiner) answers for it
			 */
			/* round 0: no longer once a recovery ballot was promised here */
			if (n->promised > 0 && brk != BRK_RECNOPROMISE)
				break;
			if (n->epoch == m->E2 && n->eid == m->id2 && n->pending && n->prop == m->prop &&
				(brk == BRK_NOMOVEFROM ||
				 (n->id == m->to && n->pepoch == m->E && n->peid == m->Eid)))
			{
				*acc = 1;
				break;
			}
			if (!((n->id == m->to || brk == BRK_NOMOVEFROM) &&
				  n->epoch == m->E && n->eid == m->Eid && !n->pending))
				break;
			/* prev_* = the row's values before the update */
			n->pepoch = n->epoch;
			n->peid = n->eid;
			n->pmem = n->mem;
			n->epoch = m->E2;
			n->eid = m->id2;
			n->mem = m->set;
			n->pending = 1;
			n->prop = m->prop;
			n->bal = 0;
			*acc = 1;
			break;
		case M_REVERT:
			/* only a step of round 0: one a recovery took on stays */
			if (n->epoch != m->E2 || n->eid != m->id2 || !n->pending || n->bal != 0)
				break;
			n->epoch = n->pepoch;
			n->eid = n->peid;
			n->mem = n->pmem;
			n->pending = 0;
			n->prop = -1;
			*acc = 1;
			break;
		case M_MARKS:
			if (n->epoch != m->E2 || n->eid != m->id2)
				break;
			*res = n->hwm;
			*acc = 1;
			break;
		case M_JOIN:
			/*
			 * distseq_peer_join, on the node meant only: the same step again
			 * (come from (0, 0)) is a no-op
			 */
			if (n->id != m->to)
				break;
			if (n->epoch == m->E2 && n->eid == m->id2 && n->pending && n->prop == m->prop &&
				n->pepoch == 0 && n->peid == 0)
			{
				*acc = 1;
				break;
			}
			/* only a fresh node (broken=nofreshcheck: any node) */
			if (!is_fresh(n) && brk != BRK_NOFRESHCHECK)
				break;
			n->pepoch = n->epoch;
			n->peid = n->eid;
			n->pmem = n->mem;
			n->epoch = m->E2;
			n->eid = m->id2;
			n->mem = m->set;
			n->pending = 1;
			n->prop = m->prop;
			*acc = 1;
			break;
		case M_ACT:
			if (!act_ok(n, m))
				break;
			activate(n, s, m->E2, m->id2, &m->set, m->mark, m->from);
			*acc = 1;
			break;
		case M_DECIDED:
			/*
			 * only the proposer itself answers, not another node at its
			 * address (an error; broken=nodecidedid: any node answers)
			 */
			if (n->id != m->to && brk != BRK_NODECIDEDID)
				break;
			if (n->t1)
				return R_WAIT;	/* distseq_member_lock_changes: a phase one in flight here */
			*res = was_decided(n->id, m->id2);
			*acc = 1;
			break;
		case M_PREP:
			/*
			 * distseq_peer_prepare(E0, ballot): a promise to take no step of
			 * a lower ballot in the instance of E0, with the change this
			 * node took (and its ballot), if any.  A node active in the
			 * membership after E0 answers with it: that change was decided.
			 */
			prep.kind = P_REFUSED;
			prep.promised = n->promised;
			if (n->id != m->to)
				break;
			if (!in_instance(n, m->E, m->Eid))
			{
				if (!n->pending && n->epoch == m->E + 1)
				{
					prep.kind = P_DECIDED;
					prep.E = n->epoch;
					prep.id = n->eid;
					prep.mem = n->mem;
					*acc = 1;
				}
				break;
			}
			if (m->b <= n->promised)
				break;
			if (brk != BRK_RECNOPROMISE)
				n->promised = m->b;
			prep.kind = P_PROMISE;
			prep.pending = n->pending;
			prep.bal = n->bal;
			prep.E = n->epoch;
			prep.id = n->eid;
			prep.mem = n->mem;
			*acc = 1;
			break;
		case M_ACC:
			/* distseq_peer_accept(E0, ballot, change): take it, pending */
			if (n->id != m->to || !in_instance(n, m->E, m->Eid))
				break;
			if (m->b < n->promised && brk != BRK_RECNOPROMISE)
				break;
			if (!n->pending)
			{
				n->pepoch = n->epoch;
				n->peid = n->eid;
				n->pmem = n->mem;
			}
			n->epoch = m->E2;
			n->eid = m->id2;
			n->mem = m->set;
			n->pending = 1;
			n->prop = m->prop;
			n->bal = m->b;
			if (brk != BRK_RECNOPROMISE)
				n->promised = m->b;
			*acc = 1;
			break;
		case M_INTRO:
			if (n->has_seq)
				break;			/* exists: distseq_peer_create returns false */
			n->has_seq = 1;
			/* created at the mark read, or at the seed kept if larger */
			set_hwm(s, n->hwm > m->M ? n->hwm : m->M);
			*acc = 1;
			break;
	}
	note(2, "    %s on n%d from %s: %s (node now epoch %s%s hwm %lld)%s",
		 msg_names[m->kind], n->id, m->from, *acc ? "done" : "refused",
		 epstr(n->epoch, n->eid, b1), n->pending ? " pending" : "", (long long) n->hwm,
		 m->kind == M_CAS ? (snprintf(b2, sizeof b2, " M=%lld", (long long) m->M), b2) : "");
	return R_OK;
}

static const Set *peers_gone(int s);

/* can slot a reach node id bid (a registered peer, up, not cut off)? */
static int
reach(int a, int bid)
{
	int			b = slot_of(bid);

	if (b < 0 || !nd[a].up || !nd[b].up)
		return -1;
	if (a != b && (cut[a][b] || set_has(peers_gone(a), bid)))
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
rcall(int from, Msg *m, i64 *res, int *acc)
{
	int			t = reach(from, m->to);
	int			ro = m->kind == M_MARKS || m->kind == M_DECIDED;
	int			r;

	*acc = 0;
	*res = -1;
	if (t < 0)
		return R_FAIL;
	if (chance(p_anom))
	{
		if (!ro)
			delay_msg(m);
		return R_FAIL;
	}
	r = apply(t, m, res, acc);
	if (r == R_WAIT)
	{
		st.waits++;
		if (chance(0.05))
		{
			/* the caller times out; the request waits on in the server */
			if (!ro)
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
		*res = -1;
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

/* ---- the worker of each node: one job at a time ---- */

/*
 * A job is what a node's refill worker does, one at a time (worker.c): an
 * agent pass (distseq_change_resume: phase two of this node's unfinished change,
 * then the recovery of a pending membership; then, if this node may, one
 * attempt to win a window), or a membership change asked of it (phase one,
 * then phase two).
 */
enum { J_NONE, J_PASS, J_CHANGE };
enum {
	PH_FIN, PH_MARKS, PH_ACT, PH_SELF,	/* phase two (change_finish) */
	PH_REC,						/* recovery (change_recover) */
	PH_AGENT, A_READ, A_INTRO, A_CAS, A_LOCAL,	/* the agent */
	C_READ, C_FRESH, C_JOIN, C_VOTE, C_DECIDE, C_REVERT,	/* phase one (change_propose) */
	R_PREP, R_ACC, R_DEC		/* recovery of the instance (change_settle) */
};
enum { OP_ADD = 1, OP_REMOVE, OP_RECOVER };
#define MAXR0		8			/* changes of round 0 a recovery tells apart */
#define F_REACH 1
#define F_INEP	2
#define F_SEQ	4

typedef struct
{
	int			kind, slot, id, ph, idx;
	long		no;
	/* agent */
	i64			E;
	u64			Eid;
	Set			mem,
				won;
	int			read, wins;
	i64			top, X;
	unsigned char fl[MAXMEM];
	/* phase one */
	int			op, tg, cnt;
	Set			moved;
	/* phase two */
	Change		c;
	int			got, failed;
	i64			mark;
	/* recovery: its ballot, the promises, what they said */
	i64			b,
				bestbal;
	int			npromised,
				known,			/* a node is active in the change after E0 */
				nr0,
				r0cnt[MAXR0];
	Change		best,
				r0[MAXR0];
	/* a change: its transaction T1, until phase one commits or aborts */
	int			t1x;			/* in T1 (phase two of the change before, phase one) */
	int			tlock;			/* the node row: 1 read FOR SHARE, 2 written, in T1 */
	Node		tn;				/* the node as T1 sees it (rows it wrote) */
} Job;

static Job	jb[MAXN];

/* how a phase one in flight on slot s holds its node row (0: not at all) */
static int
row_lock(int s)
{
	int			k = nd[s].job;

	return k >= 0 && jb[k].kind == J_CHANGE && jb[k].t1x ? jb[k].tlock : 0;
}

/* the rows of a node: its node row (and sequence), and its change row */
static void
copy_node_row(Node *d, const Node *n)
{
	d->epoch = n->epoch;
	d->eid = n->eid;
	d->mem = n->mem;
	d->pending = n->pending;
	d->prop = n->prop;
	d->pepoch = n->pepoch;
	d->peid = n->peid;
	d->pmem = n->pmem;
	d->hwm = n->hwm;
	d->has_seq = n->has_seq;
	d->promised = n->promised;
	d->bal = n->bal;
}

/*
 * The node as job j sees it: in T1, the rows T1 wrote (the node row as
 * committed until T1 writes it), else the node as committed.
 */
static Node *
job_node(Job *j)
{
	if (j->kind != J_CHANGE || !j->t1x)
		return &nd[j->slot];
	if (j->tlock < 2)
		copy_node_row(&j->tn, &nd[j->slot]);
	return &j->tn;
}

/* the peer entries deleted on slot s, as its worker sees them */
static const Set *
peers_gone(int s)
{
	int			k = nd[s].job;

	return k >= 0 ? &job_node(&jb[k])->forgot : &nd[s].forgot;
}

/* T1 commits: what it wrote is the node's */
static void
t1_commit(Job *j)
{
	Node	   *n = &nd[j->slot];

	if (j->tlock == 2)
	{
		set_hwm(j->slot, j->tn.hwm);
		copy_node_row(n, &j->tn);
	}
	n->chg = j->tn.chg;
	n->ch = j->tn.ch;
	n->forgot = j->tn.forgot;
	n->t1 = 0;
	j->t1x = 0;
	j->tlock = 0;
}
static int	ag[MAXN];			/* slots of the nodes running an agent pass, or -1 */
static int	pr[MAXN];			/* ... running a change, or -1 */

static int
quorum(int n)
{
	return n / 2 + 1;
}

static void
job_end(Job *j)
{
	if (j->kind == J_CHANGE)
		nd[j->slot].t1 = 0;		/* T1, if still in flight, aborts */
	nd[j->slot].job = -1;
	j->kind = J_NONE;
	j->t1x = 0;
	j->tlock = 0;
	for (int k = 0; k < K; k++)
		if (ag[k] == j->slot)
			ag[k] = -1;
	for (int k = 0; k < NP; k++)
		if (pr[k] == j->slot)
			pr[k] = -1;
}

/* the worker dies (its node crashed, or it did): the transaction aborts */
static void
job_die(Job *j, const char *why)
{
	if (j->kind == J_NONE)
		return;
	if (j->kind == J_CHANGE)
	{
		st.prop_crash++;
		if (j->t1x)
			st.ch_fail++;
		note(1, "change#%ld by n%d dies (%s)%s", j->no, j->id, why,
			 nd[j->slot].t1 ? ": phase one aborts" : "");
	}
	else
	{
		st.agent_crash++;
		note(2, "pass#%ld on n%d dies (%s)", j->no, j->id, why);
	}
	job_end(j);
}

/* ---- agents (agent.c: agent_check_member, agent_read, agent_introduce, agent_allocate) ---- */

/* may this node open windows (agent_check_member; agent_sequences)? */
static int
agent_ok(int s)
{
	if (!nd[s].up || !nd[s].has_seq || !has_peers(s))
		return 0;
	if (brk == BRK_NOPENDING)
		return in_own_view(s) || nd[s].pending;
	return in_own_view(s) && !nd[s].pending;
}

static void
agent_begin(Job *a)
{
	int			s = a->slot;
	char		b1[32],
				b2[LINE];

	a->ph = A_READ;
	a->idx = 0;
	a->E = nd[s].epoch;
	a->Eid = nd[s].eid;
	a->mem = nd[s].mem;
	a->won.n = 0;
	a->wins = 0;
	memset(a->fl, 0, sizeof a->fl);
	a->top = nd[s].hwm;			/* the local mark, read first */
	a->read = 1;
	a->X = 1 + rnd(8);
	st.attempts++;
	note(2, "agent#%ld on n%d starts: epoch %s members %s, own hwm %lld", a->no, a->id,
		 epstr(a->E, a->Eid, b1), set_str(&a->mem, b2, sizeof b2), (long long) a->top);
}

static void
agent_step(Job *a)
{
	int			s = a->slot;
	int			mj = quorum(a->mem.n);
	char		b1[32],
				b2[LINE],
				how[200];
	Msg			m;
	i64			res;
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
					note(2, "agent#%ld on n%d: no majority (%d of %d read in epoch %s)",
						 a->no, a->id, a->read, a->mem.n, epstr(a->E, a->Eid, b1));
					job_end(a);
					return;
				}
				note(2, "agent#%ld on n%d: read %d of %d, M=%lld", a->no, a->id, a->read,
					 a->mem.n, (long long) a->top);
				a->ph = A_INTRO;
				a->idx = 0;
				return;
			}
			i = a->idx++;
			{
				int			t = rread(s, a->mem.v[i]);

				if (t < 0)
					return;
				a->fl[i] = F_REACH | (nd[t].has_seq ? F_SEQ : 0);
				/* in the epoch: the same (epoch, epoch_id), pending or not */
				if ((nd[t].epoch == a->E && nd[t].eid == a->Eid) || brk == BRK_NOEPOCH)
				{
					a->fl[i] |= F_INEP;
					a->read++;
					/* a member lacking the sequence answers with its seed */
					if (nd[t].hwm > a->top)
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
			r = rcall(s, &m, &res, &acc);
			if (r == R_WAIT)
				return;			/* waits for a lock: the same call, next step */
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
			r = rcall(s, &m, &res, &acc);
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
			memset(&m, 0, sizeof m);
			m.kind = M_CAS;
			m.to = a->id;
			m.E = a->E;
			m.Eid = a->Eid;
			m.M = a->top;
			m.nh = a->top + a->X;
			snprintf(m.from, sizeof m.from, "agent#%ld", a->no);
			apply(s, &m, &res, &acc);
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
				note(2, "agent#%ld on n%d lost: won on %s, %d of %d members, M=%lld", a->no,
					 a->id, set_str(&a->won, b2, sizeof b2), a->wins, a->mem.n,
					 (long long) a->top);
			}
			job_end(a);
			return;
	}
}

/*
 * Inline allocation of a node that was never in a group (windows.c,
 * distseq_windows_ensure): under a share lock on the node row, which orders
 * it against every change of the row, so it is one step here.
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

	for (int i = 0; i < N; i++)
		if (nd[i].up && nd[i].has_seq && !has_peers(i) && nd[i].npriv < MAXPRIV)
			cand[nc++] = i;
	if (nc == 0)
		return;
	s = cand[rnd(nc)];
	top = nd[s].hwm;
	snprintf(how, sizeof how, "inline refill on n%d (alone%s), top %lld", nd[s].id,
			 nd[s].joined ? "" : ", its own sequence", (long long) top);
	st.inl++;
	note(1, "inline refill on n%d (alone%s) makes [%lld,%lld)", nd[s].id,
		 nd[s].joined ? "" : ", its own sequence", (long long) top, (long long) (top + X));
	add_window(s, top, top + X, how);
}

/* ---- membership changes (change.c) ---- */

static long job_no;

/*
 * May slot s be asked for a change?  Not pending, or pending in its own
 * change, which the change finishes first (a node pending in another's
 * change only has its change refused).
 */
static int
prop_ok(int s)
{
	return nd[s].up && nd[s].job < 0 && nd[s].joined && (!nd[s].pending || nd[s].chg);
}

/*
 * distseq_change_run: a change asked of slot s (op, target node id).  One
 * transaction T1 under the change lock: phase two of this node's unfinished
 * change (its errors only logged), then the node's state read again, then
 * the proposal (change_add or change_remove, change_propose).
 */
static void
change_begin(int s, int op, int tg)
{
	Job		   *p = &jb[s];

	memset(p, 0, sizeof *p);
	p->kind = J_CHANGE;
	p->slot = s;
	p->id = nd[s].id;
	p->no = ++job_no;
	p->op = op;
	p->tg = tg;
	p->t1x = 1;
	p->tn = nd[s];
	nd[s].job = s;
	nd[s].t1 = 1;				/* distseq_member_lock_changes, until T1 commits or aborts */
	p->ph = PH_FIN;
	st.ch_start++;
	if (step_no >= burst_until && chance(0.1))
		burst_until = step_no + 8 * (N + 4);
	note(1, "change#%ld by n%d starts: %s n%d", p->no, p->id,
		 op == OP_ADD ? "add" : "remove", tg);
}

/* a change by some node that may run one, on a random target */
static int	recover_start(void);
static void rec_step(Job *p);

static int
change_start(void)
{
	int			cand[MAXN],
				nc = 0,
				s,
				op;
	int			addc[MAXN],
				na = 0;
	Set			remc;
	Set		   *old;

	/* a member settles the change from its membership, at times */
	if (chance(0.08))
		return recover_start();
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
		return -1;
	s = cand[rnd(nc)];
	old = &nd[s].mem;
	/* joiners: usually fresh machines, sometimes anyone (refused unless fresh) */
	{
		int			freshonly = chance(0.9);

		for (int t = 0; t < N; t++)
			if (t != s && !set_has(old, nd[t].id) && (!freshonly || !nd[t].joined))
				addc[na++] = t;
	}
	remc = *old;
	set_del(&remc, nd[s].id);
	if (!(opt_ops & 1))
		na = 0;
	if (!(opt_ops & 2))
		remc.n = 0;
	if (na > 0 && (remc.n == 0 || chance(old->n < (N * 2) / 3 ? 0.75 : 0.3)))
		op = OP_ADD;
	else if (remc.n > 0)
		op = OP_REMOVE;
	else
		return -1;
	change_begin(s, op, op == OP_ADD ? nd[addc[rnd(na)]].id : remc.v[rnd(remc.n)]);
	return s;
}

/* an error in T1: it aborts, with all it wrote here */
static void
change_fail(Job *p, const char *why)
{
	st.ch_fail++;
	note(1, "change#%ld by n%d FAILED: %s", p->no, p->id, why);
	if (opt_raise && p->op == OP_RECOVER)
	{
		/* as change_settle: refused for a higher round, promise it, whatever instance */
		Node	   *n = &nd[p->slot];
		i64			r = n->seenbal >> 24;

		if (r >= (p->b >> 24) && (n->promised >> 24) < r)
			n->promised = r << 24;
	}
	job_end(p);
}

/*
 * phase two is over for this job: a pass goes on to the recovery, a change
 * in T1 to its proposal
 */
static void
fin_done(Job *j)
{
	if (j->kind == J_CHANGE && j->t1x)
	{
		j->ph = C_READ;
		j->idx = 0;
	}
	else if (j->kind == J_CHANGE)
		job_end(j);
	else
	{
		j->ph = PH_REC;
		j->idx = 0;
	}
}

/*
 * change_finished: the unfinished change row is finished, and the peer
 * entries of the nodes it removed are deleted
 */
static void
change_finished(Node *n)
{
	if (!n->chg)
		return;
	for (int i = 0; i < n->ch.pmem.n; i++)
		if (!set_has(&n->ch.mem, n->ch.pmem.v[i]))
			set_add(&n->forgot, n->ch.pmem.v[i]);
	n->chg = 0;
}

/*
 * An error in change_finish: its subtransaction aborts and it is logged; a
 * pass goes on with the recovery (resume_recover) and the agent.
 */
static void
fin_error(Job *j, const char *what)
{
	char		b1[32];

	st.p2_errors++;
	note(1, "%s#%ld on n%d: ERROR in phase two of %s: %s (logged)", j->kind == J_PASS ? "pass" : "change",
		 j->no, j->id, epstr(j->c.E, j->c.id, b1), what);
	if (j->kind == J_CHANGE && j->t1x)
	{
		/* its subtransaction rolls back, with its locks */
		j->tn = nd[j->slot];
		j->tlock = 0;
	}
	fin_done(j);
}

static void
fin_step(Job *j)
{
	int			s = j->slot;
	Node	   *n = job_node(j);	/* in T1, as T1 sees it */
	Msg			m;
	i64			res;
	int			acc,
				r,
				id;
	char		b1[32];

	switch (j->ph)
	{
		case PH_FIN:
			if (!n->chg)
			{
				fin_done(j);
				return;
			}
			j->c = n->ch;
			j->got = 0;
			j->failed = 0;
			j->mark = 0;
			j->idx = 0;
			/* another node's change has moved this one on */
			if (n->epoch != j->c.E || n->eid != j->c.id)
			{
				note(1, "n%d: its change to %s is superseded here; finished", n->id,
					 epstr(j->c.E, j->c.id, b1));
				st.p2_superseded++;
				change_finished(n);
				fin_done(j);
				return;
			}
			st.p2_runs++;
			j->ph = PH_MARKS;
			return;

		case PH_MARKS:
			if (j->idx < j->c.pmem.n)
			{
				id = j->c.pmem.v[j->idx++];
				if (id == n->id)
				{
					/* distseq_member_marks: SELECT ... FOR SHARE of the node row */
					if (j->t1x && j->tlock < 1)
						j->tlock = 1;
					if (n->epoch != j->c.E || n->eid != j->c.id)
					{
						fin_error(j, "this node is not in that membership (distseq_member_marks)");
						return;
					}
					j->got++;
					if (n->hwm > j->mark)
						j->mark = n->hwm;
					return;
				}
				memset(&m, 0, sizeof m);
				m.kind = M_MARKS;
				m.to = id;
				m.E2 = j->c.E;
				m.id2 = j->c.id;
				snprintf(m.from, sizeof m.from, "phase two of n%d", n->id);
				r = rcall(s, &m, &res, &acc);
				if (r == R_WAIT)
				{
					j->idx--;	/* the same call, next step */
					return;
				}
				if (r == R_OK && acc)
				{
					j->got++;
					if (res > j->mark)
						j->mark = res;
				}
				return;
			}
			if (j->got < (brk == BRK_FEWMARKS ? 1 : j->c.pmem.n - quorum(j->c.pmem.n) + 1))
			{
				st.p2_fewmarks++;
				note(1, "n%d: phase two of %s: only %d of %d former members gave marks",
					 n->id, epstr(j->c.E, j->c.id, b1), j->got, j->c.pmem.n);
				fin_done(j);
				return;
			}
			note(1, "n%d: phase two of %s: marks from %d of %d former members, largest %lld",
				 n->id, epstr(j->c.E, j->c.id, b1), j->got, j->c.pmem.n, (long long) j->mark);
			j->ph = PH_ACT;
			j->idx = 0;
			return;

		case PH_ACT:
			while (j->idx < j->c.mem.n && j->c.mem.v[j->idx] == n->id)
				j->idx++;
			if (j->idx >= j->c.mem.n)
			{
				j->ph = PH_SELF;
				return;
			}
			memset(&m, 0, sizeof m);
			m.kind = M_ACT;
			m.to = j->c.mem.v[j->idx++];
			m.E = j->c.pE;
			m.Eid = j->c.pid;
			m.E2 = j->c.E;
			m.id2 = j->c.id;
			m.set = j->c.mem;
			m.mark = j->mark;
			snprintf(m.from, sizeof m.from, "phase two of n%d", n->id);
			r = rcall(s, &m, &res, &acc);
			if (r == R_WAIT)
			{
				j->idx--;
				return;
			}
			if (r != R_OK || !acc)
			{
				j->failed++;
				note(1, "n%d: phase two of %s: activation of n%d failed", n->id,
					 epstr(j->c.E, j->c.id, b1), m.to);
			}
			else
				note(1, "n%d: phase two of %s: n%d active, mark %lld", n->id,
					 epstr(j->c.E, j->c.id, b1), m.to, (long long) j->mark);
			return;

		case PH_SELF:
			memset(&m, 0, sizeof m);
			m.kind = M_ACT;
			m.to = n->id;
			m.E = j->c.pE;
			m.Eid = j->c.pid;
			m.E2 = j->c.E;
			m.id2 = j->c.id;
			if (!act_ok(n, &m))
			{
				fin_error(j, "this node cannot take that membership (distseq_member_activate)");
				return;
			}
			if (j->t1x)
				j->tlock = 2;	/* the node row, written in T1 */
			activate(n, s, j->c.E, j->c.id, &j->c.mem, j->mark, "phase two");
			if (j->failed == 0)
			{
				change_finished(n);
				st.p2_done++;
				note(1, "n%d: change to %s finished", n->id, epstr(j->c.E, j->c.id, b1));
			}
			else
			{
				st.p2_actfail++;
				note(1, "n%d: active in %s; %d members not yet", n->id,
					 epstr(j->c.E, j->c.id, b1), j->failed);
			}
			fin_done(j);
			return;
	}
}

/* T1 ends with no change (the add or remove had nothing to do): commits */
static void
change_none(Job *p, const char *why)
{
	note(1, "change#%ld by n%d: no change (%s)", p->no, p->id, why);
	t1_commit(p);
	job_end(p);
}

static void
change_step(Job *p)
{
	int			s = p->slot;
	Node	   *n;
	Msg			m;
	i64			res;
	int			acc,
				r,
				t;
	char		why[200],
				b1[32],
				b2[LINE];

	if (p->ph >= R_PREP)
	{
		rec_step(p);
		return;
	}
	if (p->ph < C_READ)
	{
		fin_step(p);
		return;
	}
	n = job_node(p);
	memset(&m, 0, sizeof m);
	snprintf(m.from, sizeof m.from, "change#%ld", p->no);
	switch (p->ph)
	{
		case C_READ:
			/* the state read again, after phase two of the change before */
			if (n->pending)
			{
				change_fail(p, "this node is pending in a change not active here");
				return;
			}
			p->E = n->epoch;
			p->Eid = n->eid;
			p->mem = n->mem;	/* E0's members */
			p->c.pE = p->E;
			p->c.pid = p->Eid;
			p->c.pmem = p->mem;
			p->c.E = p->E + 1;
			do
				p->c.id = rnd64() >> 1;
			while (p->c.id == 0);
			if (p->op == OP_REMOVE)
			{
				if (!set_has(&n->mem, p->tg))
				{
					/* not a member: its peer entry is deleted */
					set_add(&n->forgot, p->tg);
					change_none(p, "the node removed is no member");
					return;
				}
				p->c.mem = p->mem;
				set_del(&p->c.mem, p->tg);
				p->ph = C_VOTE;
			}
			else
				p->ph = C_FRESH;
			p->idx = 0;
			return;

		case C_FRESH:
			/* change_add: the node at the joiner's address, and is it fresh? */
			t = rread(s, p->tg);
			if (t < 0)
			{
				snprintf(why, sizeof why, "joiner n%d unreachable", p->tg);
				change_fail(p, why);
				return;
			}
			p->tg = nd[t].id;
			if (set_has(&n->mem, p->tg))
			{
				change_none(p, "the node added is a member");
				return;
			}
			if (!is_fresh(&nd[t]))
			{
				snprintf(why, sizeof why, "n%d is not fresh", p->tg);
				change_fail(p, why);
				return;
			}
			p->c.mem = p->mem;
			set_add(&p->c.mem, p->tg);
			p->ph = C_JOIN;
			return;

		case C_JOIN:
			/* change_propose: the joiner first, distseq_peer_join */
			m.kind = M_JOIN;
			m.to = p->tg;
			m.E2 = p->c.E;
			m.id2 = p->c.id;
			m.set = p->c.mem;
			m.prop = p->id;
			r = rcall(s, &m, &res, &acc);
			if (r == R_WAIT)
				return;
			if (r != R_OK || !acc)
			{
				/* an error: T1 aborts, nothing reverted (a joiner that moved recovers) */
				snprintf(why, sizeof why, "joiner n%d %s", p->tg,
						 r == R_OK ? "refused to join: not fresh" : "did not answer");
				change_fail(p, why);
				return;
			}
			set_add(&p->moved, p->tg);
			note(1, "change#%ld by n%d: joiner n%d moved (pending), epoch %s %s -> %s",
				 p->no, p->id, p->tg, epstr(p->E, p->Eid, b1), set_str(&p->mem, b2, 120),
				 epstr(p->c.E, p->c.id, b1 + 16));
			p->ph = C_VOTE;
			p->idx = 0;
			return;

		case C_VOTE:
			while (p->idx < p->mem.n && p->mem.v[p->idx] == p->id)
				p->idx++;
			if (p->idx >= p->mem.n)
			{
				p->ph = C_DECIDE;
				return;
			}
			m.kind = M_EPOCH;
			m.to = p->mem.v[p->idx++];
			m.E = p->E;
			m.Eid = p->Eid;
			m.E2 = p->c.E;
			m.id2 = p->c.id;
			m.set = p->c.mem;
			m.prop = p->id;
			r = rcall(s, &m, &res, &acc);
			if (r == R_WAIT)
			{
				p->idx--;
				return;
			}
			if (r == R_OK && acc)
			{
				p->cnt++;
				set_add(&p->moved, m.to);
				note(1, "change#%ld by n%d: n%d moved (pending)", p->no, p->id, m.to);
			}
			else
				note(1, "change#%ld by n%d: n%d %s", p->no, p->id, m.to,
					 r == R_OK ? "refused" : "did not answer");
			return;

		case C_DECIDE:
			/* the joiner does not count: a majority of E0 */
			if (p->cnt + 1 < (brk == BRK_NOQUORUM ? 1 : quorum(p->mem.n)))
			{
				note(1, "change#%ld by n%d: %d of %d moved, %d needed; reverting %d", p->no,
					 p->id, p->cnt + 1, p->mem.n, quorum(p->mem.n), p->moved.n);
				p->ph = C_REVERT;
				p->idx = 0;
				return;
			}
			/* distseq_member_move on this node, in T1 */
			if (n->epoch != p->E || n->eid != p->Eid || n->pending)
			{
				change_fail(p, "its own node moved on (no revert: left to recovery)");
				return;
			}
			/* a recovery of E0 has reached this node: round 0 is over here */
			if (n->promised > 0 && brk != BRK_RECNOPROMISE)
			{
				p->ph = C_REVERT;
				p->idx = 0;
				return;
			}
			p->tlock = 2;
			n->pepoch = n->epoch;
			n->peid = n->eid;
			n->pmem = n->mem;
			n->epoch = p->c.E;
			n->eid = p->c.id;
			n->mem = p->c.mem;
			n->pending = 1;
			n->prop = n->id;
			change_finished(n);	/* an earlier row: superseded */
			n->chg = 1;
			n->ch = p->c;
			t1_commit(p);		/* commit: decided */
			log_decided(p->id, p->c.id, p->c.pE, p->c.pid);
			st.ch_ok++;
			st.last_change = step_no;
			note(1, "change#%ld by n%d DECIDED: %s, %d of %d moved, members %s", p->no, p->id,
				 epstr(p->c.E, p->c.id, b1), p->cnt + 1, p->mem.n,
				 set_str(&p->c.mem, b2, sizeof b2));
			p->ph = PH_FIN;
			return;

		case C_REVERT:
			if (p->idx >= p->moved.n)
			{
				change_fail(p, "no majority");
				return;
			}
			m.kind = M_REVERT;
			m.to = p->moved.v[p->idx++];
			m.E2 = p->c.E;
			m.id2 = p->c.id;
			r = rcall(s, &m, &res, &acc);
			if (r == R_WAIT)
			{
				p->idx--;
				return;
			}
			if (r != R_OK || !acc)
			{
				st.revert_fail++;
				note(1, "change#%ld by n%d: revert of n%d failed", p->no, p->id, m.to);
			}
			return;
	}
}

/* ---- recovery of a membership change (change_settle) ---- */

/*
 * May slot s settle the instance of its membership E0: a member of E0,
 * active in it or pending from it (in any change proposed from it)?
 */
static int
rec_ok(int s)
{
	const Node *n = &nd[s];

	if (!n->up || n->job >= 0 || !n->joined || opt_norec)
		return 0;
	if (!n->pending)
		return n->epoch > 0 && in_own_view(s);
	return n->pepoch > 0 && set_has(&n->pmem, n->id);
}

static void
recover_begin(int s)
{
	Job		   *p = &jb[s];
	Node	   *n = &nd[s];
	i64			top = n->promised > n->seenbal ? n->promised : n->seenbal;
	char		b1[32];

	memset(p, 0, sizeof *p);
	p->kind = J_CHANGE;
	p->slot = s;
	p->id = n->id;
	p->no = ++job_no;
	p->op = OP_RECOVER;
	if (n->pending)
	{
		p->E = n->pepoch;
		p->Eid = n->peid;
		p->mem = n->pmem;
	}
	else
	{
		p->E = n->epoch;
		p->Eid = n->eid;
		p->mem = n->mem;
	}
	/* a ballot above any this node saw: (round, node), round >= 1 */
	p->b = (((top >> 24) + 1) << 24) | (i64) (n->id & 0xffffff);
	n->job = s;
	n->t1 = 1;					/* the change lock, until it decides or fails */
	p->ph = R_PREP;
	st.rec_start++;
	note(1, "recovery#%ld by n%d starts: settles the change from %s, ballot %lld.%d", p->no,
		 p->id, epstr(p->E, p->Eid, b1), (long long) (p->b >> 24), p->id);
}

static int
recover_start(void)
{
	int			cand[MAXN],
				nc = 0,
				s;

	for (int i = 0; i < N; i++)
		if (rec_ok(i))
			cand[nc++] = i;
	if (nc == 0)
		return -1;
	s = cand[rnd(nc)];
	recover_begin(s);
	return s;
}

/* the change the recovery will decide: from E0 to (E, id, mem) */
static void
rec_value(Job *p, i64 E, u64 id, const Set *mem)
{
	p->c.pE = p->E;
	p->c.pid = p->Eid;
	p->c.pmem = p->mem;
	p->c.E = E;
	p->c.id = id;
	p->c.mem = *mem;
}

static void
rec_step(Job *p)
{
	int			s = p->slot;
	Node	   *n = &nd[s];
	int			q = quorum(p->mem.n);
	Msg			m;
	i64			res;
	int			acc,
				r,
				i;
	char		why[200],
				b1[32],
				b2[LINE];

	memset(&m, 0, sizeof m);
	snprintf(m.from, sizeof m.from, "recovery#%ld", p->no);
	m.E = p->E;
	m.Eid = p->Eid;
	m.b = p->b;
	m.prop = p->id;
	switch (p->ph)
	{
		case R_PREP:
			if (p->idx < p->mem.n)
			{
				m.kind = M_PREP;
				m.to = p->mem.v[p->idx++];
				if (m.to == p->id)
				{
					/* this node's own promise: committed on its own */
					apply(s, &m, &res, &acc);
					r = R_OK;
				}
				else
					r = rcall(s, &m, &res, &acc);
				if (r == R_WAIT)
				{
					p->idx--;
					return;
				}
				if (r != R_OK)
					return;
				if (prep.kind == P_REFUSED)
				{
					if (prep.promised > n->seenbal)
						n->seenbal = prep.promised;
					return;
				}
				if (prep.kind == P_DECIDED)
				{
					/* active in the membership after E0: that change was decided */
					if (!p->known)
						rec_value(p, prep.E, prep.id, &prep.mem);
					p->known = 1;
					return;
				}
				p->npromised++;
				if (!prep.pending)
					return;
				if (prep.bal > 0)
				{
					if (prep.bal > p->bestbal)
					{
						p->bestbal = prep.bal;
						p->best.E = prep.E;
						p->best.id = prep.id;
						p->best.mem = prep.mem;
					}
					return;
				}
				for (i = 0; i < p->nr0 && p->r0[i].id != prep.id; i++)
					;
				if (i == p->nr0 && p->nr0 < MAXR0)
				{
					p->r0[i].E = prep.E;
					p->r0[i].id = prep.id;
					p->r0[i].mem = prep.mem;
					p->r0cnt[i] = 0;
					p->nr0++;
				}
				if (i < p->nr0)
					p->r0cnt[i]++;
				return;
			}
			/* every member asked: which change may have been decided? */
			if (p->known && !set_has(&p->c.mem, p->id))
			{
				st.rec_fail++;
				change_fail(p, "recovery: this node leaves in that change (a member that stays settles it)");
				return;
			}
			if (p->known)
			{
				st.rec_known++;
				note(1, "recovery#%ld by n%d: %s was decided (a member is active in it)",
					 p->no, p->id, epstr(p->c.E, p->c.id, b1));
				p->ph = R_DEC;
				return;
			}
			if (p->npromised < q && brk != BRK_RECNOQUORUM)
			{
				st.rec_fail++;
				snprintf(why, sizeof why, "recovery: %d of %d members promised, %d needed",
						 p->npromised, p->mem.n, q);
				change_fail(p, why);
				return;
			}
			if (p->bestbal > 0)
			{
				/* the change of the highest ballot a recovery took on */
				rec_value(p, p->best.E, p->best.id, &p->best.mem);
				p->tg = 1;
				st.rec_finish++;
			}
			else
			{
				/*
				 * Changes of round 0: one may have been decided only if the
				 * members that took it, with those that did not answer (its
				 * proposer, maybe), make a majority of E0.
				 */
				int			unseen = p->mem.n - p->npromised,
							k = -1,
							np = 0;

				for (i = 0; i < p->nr0; i++)
					if (p->r0cnt[i] + unseen >= q)
					{
						np++;
						k = i;
					}
				if (np > 1 || p->nr0 == MAXR0)
				{
					st.rec_fail++;
					change_fail(p, "recovery: two changes of round 0 may have been decided");
					return;
				}
				if (np == 1)
				{
					rec_value(p, p->r0[k].E, p->r0[k].id, &p->r0[k].mem);
					p->tg = 2;
					st.rec_finish++;
				}
				else
				{
					/* none was decided, nor ever will be: abandoned for a no-op */
					u64			id;

					do
						id = rnd64() >> 1;
					while (id == 0);
					rec_value(p, p->E + 1, id, &p->mem);
					p->tg = 3;
					st.rec_noop++;
				}
			}
			note(1, "recovery#%ld by n%d: %d of %d promised; takes %s %s (%s)", p->no, p->id,
				 p->npromised, p->mem.n, epstr(p->c.E, p->c.id, b1),
				 set_str(&p->c.mem, b2, sizeof b2),
				 p->tg == 1 ? "taken on by a recovery before" :
				 p->tg == 2 ? "proposed in round 0, may have been decided" :
				 "nothing may have been decided: a no-op");
			if (!set_has(&p->c.mem, p->id))
			{
				st.rec_fail++;
				change_fail(p, "recovery: this node leaves in that change (a member that stays settles it)");
				return;
			}
			p->ph = R_ACC;
			p->idx = 0;
			p->cnt = 0;
			return;

		case R_ACC:
			/* joiners first, as in phase one: best effort (one that went back joins again) */
			while (p->idx < p->c.mem.n && set_has(&p->mem, p->c.mem.v[p->idx]))
				p->idx++;
			if (p->idx < p->c.mem.n)
			{
				m.kind = M_JOIN;
				m.to = p->c.mem.v[p->idx++];
				m.E2 = p->c.E;
				m.id2 = p->c.id;
				m.set = p->c.mem;
				if (rcall(s, &m, &res, &acc) == R_WAIT)
					p->idx--;
				return;
			}
			/* then every other member of E0 */
			i = p->idx - p->c.mem.n;
			while (i < p->mem.n && p->mem.v[i] == p->id)
			{
				i++;
				p->idx++;
			}
			if (i >= p->mem.n)
			{
				p->ph = R_DEC;
				return;
			}
			m.kind = M_ACC;
			m.to = p->mem.v[i];
			m.E2 = p->c.E;
			m.id2 = p->c.id;
			m.set = p->c.mem;
			p->idx++;
			r = rcall(s, &m, &res, &acc);
			if (r == R_WAIT)
			{
				p->idx--;
				return;
			}
			if (r == R_OK && acc)
				p->cnt++;
			return;

		case R_DEC:
			/* this node's own step with the change row, in one transaction: decided */
			if (!p->known)
			{
				if (p->cnt + 1 < q)
				{
					st.rec_fail++;
					snprintf(why, sizeof why, "recovery: %d of %d members took %s, %d needed",
							 p->cnt + 1, p->mem.n, epstr(p->c.E, p->c.id, b1), q);
					change_fail(p, why);
					return;
				}
				m.kind = M_ACC;
				m.to = p->id;
				m.E2 = p->c.E;
				m.id2 = p->c.id;
				m.set = p->c.mem;
				apply(s, &m, &res, &acc);
				if (!acc)
				{
					st.rec_fail++;
					change_fail(p, "recovery: a higher ballot reached this node");
					return;
				}
			}
			else if (!(n->pending && n->epoch == p->c.E && n->eid == p->c.id))
			{
				/* decided already: this node takes it, pending, if still in E0's instance */
				if (!in_instance(n, p->E, p->Eid))
				{
					st.rec_fail++;
					change_fail(p, "recovery: this node moved on");
					return;
				}
				if (!n->pending)
				{
					n->pepoch = n->epoch;
					n->peid = n->eid;
					n->pmem = n->mem;
				}
				n->epoch = p->c.E;
				n->eid = p->c.id;
				n->mem = p->c.mem;
				n->pending = 1;
				n->prop = n->id;
				n->bal = p->b;
			}
			n->prop = n->id;
			change_finished(n);
			n->chg = 1;
			n->ch = p->c;
			n->t1 = 0;
			log_decided(p->id, p->c.id, p->c.pE, p->c.pid);
			st.ch_ok++;
			st.last_change = step_no;
			note(1, "recovery#%ld by n%d DECIDED: %s, %d of %d took it, members %s", p->no, p->id,
				 epstr(p->c.E, p->c.id, b1), p->known ? 0 : p->cnt + 1, p->mem.n,
				 set_str(&p->c.mem, b2, sizeof b2));
			p->ph = PH_FIN;
			return;
	}
}

/* ---- an agent pass (distseq_agent_run): distseq_change_resume, then the agent ---- */

static int
pass_ok(int s)
{
	return nd[s].up && nd[s].job < 0 && has_peers(s);
}

static void
pass_begin(int s)
{
	Job		   *j = &jb[s];

	memset(j, 0, sizeof *j);
	j->kind = J_PASS;
	j->slot = s;
	j->id = nd[s].id;
	j->no = ++job_no;
	j->ph = PH_FIN;
	nd[s].job = s;
}

static void
pass_step(Job *j)
{
	int			s = j->slot;
	Node	   *n = &nd[s];
	Msg			m;
	i64			res;
	int			acc,
				r;
	char		b1[32];

	if (j->ph < PH_REC)
	{
		fin_step(j);
		return;
	}
	if (j->ph > PH_AGENT)
	{
		agent_step(j);
		return;
	}
	if (j->ph == PH_REC)
	{
		/* only a step of round 0 goes back: one a recovery took on waits for it */
		if (!n->pending || n->prop == n->id || n->bal != 0)
		{
			j->ph = PH_AGENT;
			return;
		}
		if (brk != BRK_BLINDREVERT)
		{
			memset(&m, 0, sizeof m);
			m.kind = M_DECIDED;
			m.to = n->prop;
			m.E2 = n->epoch;
			m.id2 = n->eid;
			snprintf(m.from, sizeof m.from, "recovery of n%d", n->id);
			r = rcall(s, &m, &res, &acc);
			if (r == R_WAIT)
				return;
			if (r != R_OK || !acc)
			{
				/* no answer, or an error (not the proposer): asked again later */
				j->ph = PH_AGENT;
				return;
			}
			if (res == 1)
			{
				note(2, "n%d: its pending change %s was decided by n%d: waits", n->id,
					 epstr(n->epoch, n->eid, b1), n->prop);
				j->ph = PH_AGENT;
				return;
			}
		}
		st.reverted++;
		note(1, "n%d: change %s of n%d was not decided: back to %s", n->id,
			 epstr(n->epoch, n->eid, b1), n->prop, epstr(n->pepoch, n->peid, b1 + 16));
		n->epoch = n->pepoch;
		n->eid = n->peid;
		n->mem = n->pmem;
		n->pending = 0;
		n->prop = -1;
		j->ph = PH_AGENT;
		return;
	}
	/* PH_AGENT */
	if (!agent_ok(s))
	{
		job_end(j);
		return;
	}
	agent_begin(j);
}

static void
job_step(Job *j)
{
	if (j->kind == J_CHANGE)
		change_step(j);
	else if (j->kind == J_PASS)
		pass_step(j);
}

/* ---- faults ---- */

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
	if (nd[s].job >= 0)
		job_die(&jb[s], "its node crashed");
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
	i64			res;
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
	r = apply(t, &m, &res, &acc);
	if (r == R_WAIT)
		return;
	st.delivered++;
	note(1, "  %s to n%d from %s: arrives late, %s (node now epoch %lld%s hwm %lld)",
		 msg_names[m.kind], m.to, m.from, acc ? "done" : "refused",
		 (long long) nd[t].epoch, nd[t].pending ? " pending" : "", (long long) nd[t].hwm);
	msgs[i] = msgs[--nmsg];
}

/* a worker dies on its own (an error, a restart): its job aborts */
static void
worker_crash_event(int changes)
{
	int			k = changes ? rnd(NP) : rnd(K);
	int			s = changes ? pr[k] : ag[k];

	if (s >= 0)
		job_die(&jb[s], changes ? "its worker died" : "its worker died");
}

/*
 * The machine of slot s is wiped and reinstalled at the same address: a
 * fresh node with a new identity (its windows stay on record).  Calls meant
 * for its old id still reach it.
 */
static void
wipe(int s)
{
	note(1, "n%d is wiped and reinstalled at its address: fresh, as n%d", nd[s].id, nids);
	memset(&nd[s], 0, sizeof nd[s]);
	nd[s].id = new_id(s);
	nd[s].up = 1;
	nd[s].job = -1;
	nd[s].prop = -1;
	nd[s].mem.n = 1;
	nd[s].mem.v[0] = nd[s].id;
	nd[s].has_seq = chance(p_own);
	for (int t = 0; t < N; t++)
		cut[s][t] = cut[t][s] = 0;
	st.wipes++;
}

/*
 * A machine is wiped: mostly a removed one that no other node lists, at
 * times a member (its disk lost: the group has lost its vote, and its marks).
 */
static void
wipe_event(void)
{
	int			s = rnd(N),
				others = 0,
				member = chance(0.3);

	if (!nd[s].joined || nd[s].job >= 0 || s == 0)
		return;
	for (int t = 0; t < N; t++)
	{
		if (t == s)
			continue;
		if (!member &&
			(set_has(&nd[t].mem, nd[s].id) || set_has(&nd[t].pmem, nd[s].id) ||
			 (nd[t].chg && set_has(&nd[t].ch.mem, nd[s].id))))
			return;
		if (nd[t].joined && in_own_view(t))
			others++;
	}
	if (others == 0)
		return;
	wipe(s);
}

/* ---- scripted histories (--scenario=NAME): nodes a, b, c, d, e, f ---- */

static int	sc_failed_passes;
static int	sc_stuck;

/* slot s must be active in its membership, and a member of it */
static void
sc_expect_active(int s)
{
	if (nd[s].pending || !in_own_view(s) || !nd[s].joined)
	{
		note(1, "n%d is NOT active in a group (stuck)", nd[s].id);
		sc_stuck++;
	}
}

static void
sc_run(int s)
{
	Job		   *j = &jb[s];

	for (int i = 0; j->kind != J_NONE && i < 100000; i++, step_no++)
		job_step(j);
}

/* a pass of the agent on s: phase two, recovery, one attempt */
static void
sc_pass(int s)
{
	long		w = st.p2_errors;

	step_no++;
	if (!pass_ok(s))
	{
		note(1, "(n%d runs no agent pass)", nd[s].id);
		return;
	}
	pass_begin(s);
	sc_run(s);
	if (st.p2_errors > w)
		sc_failed_passes++;
}

/* a change asked of s; with decide_only, its worker dies once it is decided */
static void
sc_change_(int s, int op, int t, int decide_only)
{
	Job		   *p = &jb[s];

	step_no++;
	if (!prop_ok(s))
	{
		note(1, "(n%d cannot run a change)", nd[s].id);
		return;
	}
	change_begin(s, op, nd[t].id);
	for (int i = 0; p->kind != J_NONE && i < 100000; i++, step_no++)
	{
		if (decide_only && !p->t1x)
		{
			job_die(p, "scripted: right after the decision");
			return;
		}
		job_step(p);
	}
}

#define sc_change(s, op, t) sc_change_(s, op, t, 0)

/* where a proposer is lost for good in sc_change_lost() */
enum { K_JOINED, K_VOTED1, K_DECIDED, K_ACT1 };

/*
 * A change asked of s, whose node is lost for good (down, never back) at
 * point kp: right after the joiner moved; right after the first member
 * moved; right after the decision; in phase two, right after the first
 * member was activated.
 */
static void
sc_change_lost(int s, int op, int t, int kp)
{
	Job		   *p = &jb[s];
	static const char *what[] = {"after the join", "after the first member moved",
	"after the decision", "in phase two, after the first activation"};

	step_no++;
	if (!prop_ok(s))
	{
		note(1, "(n%d cannot run a change)", nd[s].id);
		return;
	}
	change_begin(s, op, nd[t].id);
	for (int i = 0; p->kind != J_NONE && i < 100000; i++, step_no++)
	{
		if ((kp == K_JOINED && p->t1x && p->ph == C_VOTE && p->moved.n == 1 && p->cnt == 0) ||
			(kp == K_VOTED1 && p->t1x && p->ph >= C_VOTE && p->cnt == 1) ||
			(kp == K_DECIDED && !p->t1x) ||
			(kp == K_ACT1 && !p->t1x && p->ph == PH_ACT && p->idx >= 2))
		{
			job_die(p, "scripted");
			nd[s].up = 0;
			note(1, "n%d is lost for good, %s", nd[s].id, what[kp]);
			return;
		}
		job_step(p);
	}
}

/* a recovery on s; with until_acc, it stops once it has chosen */
static void
sc_recover_(int s, int until_acc)
{
	Job		   *j = &jb[s];

	step_no++;
	if (!rec_ok(s))
	{
		note(1, "(n%d runs no recovery)", nd[s].id);
		return;
	}
	recover_begin(s);
	for (int i = 0; j->kind != J_NONE && !(until_acc && j->ph == R_ACC) && i < 100000; i++, step_no++)
		job_step(j);
}

#define sc_recover(s) sc_recover_(s, 0)

/* an agent pass on s must open a window */
static void
sc_expect_window(int s)
{
	long		w = st.windows;

	sc_pass(s);
	if (st.windows == w)
	{
		note(1, "n%d opened NO window (stuck)", nd[s].id);
		sc_stuck++;
	}
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

static void
sc_down(int s, int up)
{
	step_no++;
	nd[s].up = up;
	note(1, "n%d %s", nd[s].id, up ? "recovers" : "CRASHES");
}

/* inline refill on s, if it has no peers */
static void
sc_inline(int s)
{
	char		how[200];

	step_no++;
	if (!nd[s].up || !nd[s].has_seq || has_peers(s))
	{
		note(1, "(n%d allocates no window inline)", nd[s].id);
		return;
	}
	snprintf(how, sizeof how, "inline refill on n%d (alone%s), top %lld", nd[s].id,
			 nd[s].joined ? "" : ", its own sequence", (long long) nd[s].hwm);
	st.inl++;
	note(1, "%s: [%lld,%lld)", how, (long long) nd[s].hwm, (long long) nd[s].hwm + 4);
	add_window(s, nd[s].hwm, nd[s].hwm + 4, how);
}

static int
scenario(const char *name)
{
	enum { A, B, C, D, E, F };

	if (strncmp(name, "lost", 4) == 0 && name[4] >= '0' && name[4] <= '4' && !name[5])
	{
		/*
		 * The proposer of a change is lost for good half way.  lost1: a
		 * group of five, a removes e and is lost once b moved (no
		 * majority: abandoned).  lost0, lost2-4: a group of three, a adds
		 * d and is lost once d moved (abandoned), once b moved (a
		 * majority with a: it may have been decided), once it decided,
		 * or once it activated b in phase two.  c, a survivor, settles
		 * the change (the code before 1.7 has no way: b, c and d wait for
		 * good in lost2-4, a pending majority), then removes a; b, c (and
		 * d) are active and open windows again.
		 */
		int			k = name[4] - '0';

		for (int i = 0; i < 3; i++)
			sc_inline(A);
		sc_change(A, OP_ADD, B);
		sc_pass(A);
		sc_change(A, OP_ADD, C);
		sc_pass(A);
		if (k == 1)
		{
			sc_change(A, OP_ADD, D);
			sc_pass(A);
			sc_change(A, OP_ADD, E);
			sc_pass(A);
		}
		sc_pass(B);
		sc_pass(C);
		if (k == 1)
			sc_change_lost(A, OP_REMOVE, E, K_VOTED1);
		else
			sc_change_lost(A, OP_ADD, D, k == 0 ? K_JOINED : k == 2 ? K_VOTED1 :
						   k == 3 ? K_DECIDED : K_ACT1);
		sc_pass(B);
		sc_pass(C);
		sc_recover(C);
		sc_change(C, OP_REMOVE, A);
		sc_pass(B);
		sc_pass(C);
		sc_expect_active(B);
		sc_expect_active(C);
		if (k >= 2)
			sc_expect_active(D);
		if (k == 1)
		{
			sc_expect_active(D);
			sc_expect_active(E);
		}
		sc_expect_window(C);
		sc_expect_window(B);
		return 0;
	}
	if (strcmp(name, "splitprepare") == 0 || strcmp(name, "lateproposer") == 0)
	{
		/*
		 * A group of five with windows; a removes e.
		 *
		 * splitprepare: a is lost for good once it decided (a, b and c
		 * moved; d and e were cut off).  d settles the change while cut off from b and c: only
		 * d and e promise, fewer than a majority, and the recovery stops
		 * (broken=recnoquorum goes on: it sees no change, takes a no-op,
		 * and once the network heals b, c and e take it: two changes
		 * decided from one membership).  d settles again with all but a:
		 * b and c took the change, which with a make a majority: d
		 * finishes it.
		 *
		 * lateproposer: a is slow, not lost: b moved, then d settles the
		 * change while a is cut off from it.  b alone took it, with a not
		 * a majority: d abandons it for a no-op.  Then a goes on: c and e
		 * promised d a higher ballot, so they refuse to move, and a
		 * reverts b and fails (broken=recnopromise: prepares bind no one,
		 * a decides, and d's no-op is decided too).
		 */
		int			split = strcmp(name, "splitprepare") == 0;

		for (int i = 0; i < 3; i++)
			sc_inline(A);
		sc_change(A, OP_ADD, B);
		sc_pass(A);
		sc_change(A, OP_ADD, C);
		sc_pass(A);
		sc_change(A, OP_ADD, D);
		sc_pass(A);
		sc_change(A, OP_ADD, E);
		sc_pass(A);
		sc_pass(B);
		if (split)
		{
			sc_cut("a|de");
			sc_change_lost(A, OP_REMOVE, E, K_DECIDED);
			sc_heal();
			sc_cut("d|bc");
			sc_recover_(D, 1);
			sc_heal();
			sc_run(D);
			sc_recover(D);
		}
		else
		{
			Job		   *p = &jb[A];

			step_no++;
			change_begin(A, OP_REMOVE, nd[E].id);
			for (int i = 0; p->kind != J_NONE && p->cnt < 1 && i < 1000; i++, step_no++)
				job_step(p);
			sc_cut("a|d");
			sc_recover_(D, 1);
			sc_heal();
			for (int i = 0; p->kind != J_NONE && p->t1x && i < 1000; i++, step_no++)
				job_step(p);
			sc_run(D);
			sc_run(A);
		}
		sc_pass(D);
		sc_pass(B);
		if (split)
			sc_change(D, OP_REMOVE, A);
		sc_pass(C);
		sc_expect_active(B);
		sc_expect_active(C);
		sc_expect_active(D);
		if (!split)
		{
			sc_pass(A);
			sc_expect_active(A);
			sc_expect_active(E);
		}
		sc_expect_window(D);
		sc_expect_window(B);
		return 0;
	}

	if (strcmp(name, "freshrace") == 0)
	{
		/*
		 * n1 has a sequence of the same name, no window yet: fresh.  n0 adds
		 * it: change_add finds it fresh; before the join, n1 opens a window
		 * of its own (epoch 0, alone: inline).  distseq_peer_join must
		 * refuse it, and the change fail (broken=nofreshcheck takes it, with
		 * its window).  Then n0 adds n2, fresh, and its worker dies right
		 * after the decision: n2, pending since phase one, can open no
		 * window of its own (before 4c3967b it could, and no phase two
		 * would take it then: the first add stuck); n0's next pass
		 * activates it.
		 */
		nd[B].has_seq = 1;
		nd[C].has_seq = 1;
		sc_inline(A);
		step_no++;
		change_begin(A, OP_ADD, nd[B].id);
		for (int i = 0; jb[A].kind != J_NONE && jb[A].ph != C_JOIN && i < 1000; i++, step_no++)
			job_step(&jb[A]);
		sc_inline(B);
		sc_run(A);
		sc_change_(A, OP_ADD, C, 1);
		sc_inline(C);
		sc_pass(A);
		sc_pass(A);
		sc_pass(C);
		sc_expect_active(C);
		return 0;
	}
	if (strcmp(name, "behind") == 0)
	{
		/*
		 * c is left behind two changes: a group of three (a, b, c) that has
		 * windows; c is cut off; a wins on {a, b}; a adds d (c misses phase
		 * one and two); d wins on {d, a, b}; b adds e (c misses it too)
		 * before a's phase two could reach c; a's change is superseded.  The
		 * network heals: phase two of b's change finds c two changes
		 * behind, in the membership of a, b and c.  The code refuses it
		 * (left behind for good); --older takes it, with the marks of b's
		 * change, and c and e win windows.
		 */
		for (int i = 0; i < 3; i++)
			sc_inline(A);
		sc_change(A, OP_ADD, B);
		sc_pass(A);
		sc_change(A, OP_ADD, C);
		sc_pass(A);
		sc_pass(C);
		sc_cut("c|abde");
		sc_pass(A);
		sc_change(A, OP_ADD, D);
		sc_pass(D);
		sc_pass(D);
		sc_change(B, OP_ADD, E);
		sc_pass(A);
		sc_heal();
		sc_pass(B);
		sc_pass(C);
		sc_pass(C);
		sc_pass(E);
		sc_pass(A);
		sc_pass(D);
		sc_pass(C);
		if (opt_older)
			sc_expect_active(C);
		return 0;
	}
	if (strcmp(name, "rejoin") == 0)
	{
		/*
		 * A group of a, b and c; b wins on {b, c} while a is cut off.  b's
		 * machine is wiped and reinstalled at its address, fresh, as a new
		 * node; c is cut off; a adds the new node (a peer entry of its own,
		 * at the same address as b's).  The joiner moves in phase one; the
		 * epoch-cas meant for b reaches it too, and finds it pending in the
		 * change, from a: not the node meant, and not come from a's
		 * membership, so it refuses (before c772f3e: "the same step
		 * again", done, a vote for b).
		 */
		for (int i = 0; i < 3; i++)
			sc_inline(A);
		sc_change(A, OP_ADD, B);
		sc_pass(A);
		sc_change(A, OP_ADD, C);
		sc_pass(A);
		sc_cut("a|bc");
		sc_pass(B);
		sc_heal();
		step_no++;
		wipe(B);
		sc_cut("c|ab");
		sc_change(A, OP_ADD, B);
		/*
		 * Then a adds a fresh node d, c still cut off: the epoch-cas meant
		 * for b reaches the new node again.  (broken=nomovefrom: the new
		 * node, active since the add above, moves for b, and answers for
		 * itself as "the same step again": with a, three of four; a, it and
		 * d then win windows from below b's last one.)
		 */
		sc_change(A, OP_ADD, D);
		sc_pass(A);
		sc_pass(A);
		return 0;
	}
	/* a group of three that has windows */
	for (int i = 0; i < 3; i++)
		sc_inline(A);
	if (strcmp(name, "twonode") != 0)
	{
		sc_change(A, OP_ADD, B);
		sc_pass(A);
		sc_change(A, OP_ADD, C);
		sc_pass(A);
	}
	if (strcmp(name, "twonode") == 0)
	{
		/* a and b, split: each removes the other, "down for good" */
		sc_change(A, OP_ADD, B);
		sc_pass(A);
		sc_cut("a|b");
		sc_change(A, OP_REMOVE, B);
		sc_change(B, OP_REMOVE, A);
		sc_pass(A);
		sc_pass(B);
	}
	else if (strcmp(name, "shrink") == 0)
	{
		/* a wins on {a, b} while c is cut off; then a and b are removed */
		sc_cut("c|ab");
		sc_pass(A);
		sc_heal();
		sc_change(B, OP_REMOVE, A);
		sc_change(C, OP_REMOVE, B);
		sc_pass(C);
	}
	else if (strcmp(name, "shrink5") == 0)
	{
		/* five members; a wins on {a, b, c}; a and b are removed; c cut off */
		sc_change(A, OP_ADD, D);
		sc_pass(A);
		sc_change(A, OP_ADD, E);
		sc_pass(A);
		sc_cut("de|abc");
		sc_pass(A);
		sc_heal();
		sc_change(C, OP_REMOVE, A);
		sc_change(C, OP_REMOVE, B);
		sc_cut("c|de");
		sc_pass(D);
	}
	else if (strcmp(name, "joiners") == 0)
	{
		/* a wins on {a, b} while c is cut off; d and e join; a, b cut off */
		sc_cut("c|ab");
		sc_pass(A);
		sc_heal();
		sc_change(A, OP_ADD, D);
		sc_change(A, OP_ADD, E);
		sc_cut("ab|cde");
		sc_pass(C);
	}
	else if (strcmp(name, "fewmarks") == 0)
	{
		/*
		 * a wins on {a, b} while c is cut off.  c adds d, and its worker
		 * dies once it is decided.  c's next pass gets no mark but its own
		 * (cut off), and the links are back just for the activations.  Then
		 * c removes a while b is cut off: the marks of c and d are enough,
		 * and without the window (broken=fewmarks).  a, removed, would give
		 * its marks until the change is finished: it is cut off once the
		 * change is decided.
		 */
		sc_cut("c|ab");
		sc_pass(A);
		sc_heal();
		sc_change_(C, OP_ADD, D, 1);
		sc_cut("c|ab");
		step_no++;
		pass_begin(C);
		for (int i = 0; jb[C].kind != J_NONE && jb[C].ph <= PH_MARKS && i < 1000; i++, step_no++)
			job_step(&jb[C]);
		sc_heal();
		for (int i = 0; jb[C].kind != J_NONE && jb[C].ph < PH_REC && i < 1000; i++, step_no++)
			job_step(&jb[C]);
		sc_cut("c|ab");
		sc_run(C);
		sc_heal();
		sc_cut("c|b");
		sc_change_(C, OP_REMOVE, A, 1);
		sc_cut("c|ab");
		sc_pass(C);
	}
	else if (strcmp(name, "superseded") == 0)
	{
		/*
		 * a adds d while c is down: decided, c not active in it.  b removes
		 * c: a is moved on, active in the next membership.  a's next pass
		 * finds its own change superseded and finishes it (before cfeb8eb,
		 * every pass of a failed in phase two of it).
		 */
		sc_down(C, 0);
		sc_change(A, OP_ADD, D);
		sc_change(B, OP_REMOVE, C);
		sc_pass(A);
		sc_pass(A);
		sc_pass(B);
		sc_pass(D);
	}
	else if (strcmp(name, "reinstall") == 0)
	{
		/*
		 * Six members; a removes f, and its worker dies once it is decided.
		 * Phase two at a's pass: e is cut off, so the change stays
		 * unfinished.  b wins a window on {b, c, d} (3 of the 5 members)
		 * while a and e are cut off.  b's machine is wiped and reinstalled
		 * at its address, fresh.  c and d are cut off; phase two at a's next
		 * pass gets marks from a, e and f (enough for the six before, none
		 * with b's window) and activates e, and b: the fresh node at b's
		 * address must refuse, as it is not the node meant (broken=noidcheck
		 * takes it in: a, e and it make a majority without the window).
		 */
		sc_change(A, OP_ADD, D);
		sc_pass(A);
		sc_change(A, OP_ADD, E);
		sc_pass(A);
		sc_change(A, OP_ADD, F);
		sc_pass(A);
		sc_change_(A, OP_REMOVE, F, 1);
		sc_cut("e|abcdf");
		sc_pass(A);
		sc_heal();
		sc_cut("bcd|aef");
		sc_pass(B);
		sc_heal();
		step_no++;
		wipe(B);
		sc_cut("cd|abef");
		sc_pass(A);
		sc_pass(A);
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
 * out often or not, fresh nodes with a sequence of their own or not; and
 * half the clusters run "coarse": a job runs whole in one step, faults
 * coming only between them.
 */
enum { EV_AGENT, EV_PROP, EV_MSG, EV_CRASH, EV_AGSTEP, EV_NET, EV_INLINE, EV_REPAIR,
	EV_AGCRASH, EV_PRCRASH, EV_PRSTEP, EV_WIPE, EV_AGSTEP2, EV_COUNT };
static const int wdefault[EV_COUNT] = {600, 200, 40, 10, 5, 30, 30, 20, 10, 3, 2, 4, 45};
static int	weight[EV_COUNT];
static int	wsum = 1000;
static int	coarse;				/* jobs run whole, one a step */

static void
draw_mix(void)
{
	static const int agent_w[] = {600, 600, 200, 60, 20};
	static const int prop_w[] = {200, 200, 500, 1000};
	static const int net_w[] = {30, 30, 120, 400};
	static const int crash_w[] = {10, 10, 40};

	memcpy(weight, wdefault, sizeof weight);
	coarse = 0;
	p_own = opt_own > 0 ? 0.3 : 0;
	if (opt_vary > 0)
	{
		coarse = chance(0.5);
		weight[EV_AGENT] = agent_w[rnd(5)];
		weight[EV_AGSTEP2] = weight[EV_AGENT] / 13;
		weight[EV_PROP] = prop_w[rnd(4)];
		weight[EV_NET] = net_w[rnd(4)];
		weight[EV_CRASH] = crash_w[rnd(3)];
		weight[EV_MSG] = chance(0.5) ? 40 : 150;
		weight[EV_INLINE] = chance(0.5) ? 30 : 150;
		p_read = chance(0.5) ? p_anom : chance(0.5) ? 0.15 : 0.4;
		if (opt_own > 0)
			p_own = chance(0.5) ? 0.1 : 0.5;
		if (chance(0.5))
			for (int i = 0; i < N; i++)
				for (int j = 0; j < i; j++)
					flaky[i][j] = flaky[j][i] = chance(0.25);
		note(1, "mix: agents %d changes %d network %d crashes %d late calls %d reads failing %.2f own sequences %.1f%s",
			 weight[EV_AGENT], weight[EV_PROP], weight[EV_NET], weight[EV_CRASH],
			 weight[EV_MSG], p_read, p_own, coarse ? ", coarse" : "");
	}
	wsum = 0;
	for (int e = 0; e < EV_COUNT; e++)
		wsum += weight[e];
}

/* a random eligible node for an agent pass (repair: one with a change to resume) */
static int
pass_pick(int repair)
{
	int			cand[MAXN],
				nc = 0;

	for (int i = 0; i < N; i++)
		if (pass_ok(i) && (repair ? (nd[i].chg || (nd[i].pending && nd[i].prop != nd[i].id)) :
						   (agent_ok(i) || nd[i].chg || nd[i].pending)))
			cand[nc++] = i;
	return nc ? cand[rnd(nc)] : -1;
}

static void
run_coarse(int s)
{
	for (int i = 0; coarse && s >= 0 && jb[s].kind != J_NONE && i < 2000; i++, step_no++)
		job_step(&jb[s]);
}

static void
event(int r)
{
	int			e = 0,
				k,
				s;

	while (e < EV_COUNT - 1 && r >= weight[e])
		r -= weight[e++];
	switch (e)
	{
		case EV_AGENT:
		case EV_REPAIR:
			k = rnd(K);
			if (ag[k] >= 0)
			{
				if (e == EV_AGENT)
					job_step(&jb[ag[k]]);
				break;
			}
			if ((s = pass_pick(e == EV_REPAIR)) < 0)
				break;
			ag[k] = s;
			pass_begin(s);
			run_coarse(s);
			break;
		case EV_PROP:
			k = rnd(NP);
			if (pr[k] >= 0)
				job_step(&jb[pr[k]]);
			else if (coarse || chance(0.05))
			{
				if ((s = change_start()) < 0)
					break;
				pr[k] = s;
				run_coarse(s);
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
		case EV_AGCRASH:
			worker_crash_event(0);
			break;
		case EV_PRCRASH:
			worker_crash_event(1);
			break;
		case EV_PRSTEP:
			k = rnd(NP);
			if (pr[k] >= 0)
				job_step(&jb[pr[k]]);
			break;
		case EV_WIPE:
			wipe_event();
			break;
		default:				/* EV_AGSTEP, EV_AGSTEP2 */
			k = rnd(K);
			if (ag[k] >= 0)
				job_step(&jb[ag[k]]);
			break;
	}
}

/* ---- main ---- */

/*
 * Is the group stuck: a member of the newest active membership that is not
 * active in it (up, or wiped)?  Why, the worst reason first:
 */
enum { SK_NONE, SK_SPOILT, SK_BEHIND, SK_ORPHAN, SK_WIPED, SK_WAITING, SK_UNDECIDED, SK_NOACTIVE,
SK_COUNT };
static const char *stuck_names[] = {"", "joiner back at epoch 0", "left behind",
	"pending, its proposer wiped", "wiped member", "waiting on an unfinished change",
	"pending, undecided", "no active member up"};
static long stuck_why[SK_COUNT];

/* an unfinished change row somewhere that would activate slot t, as id */
static int
change_would_activate(int t, int id)
{
	for (int q = 0; q < N; q++)
	{
		Change	   *c = &nd[q].ch;

		if (!nd[q].chg || !set_has(&c->mem, id))
			continue;
		if ((nd[t].epoch == c->E && nd[t].eid == c->id) ||
			(nd[t].epoch == c->pE && nd[t].eid == c->pid && c->pE > 0) ||
			(opt_older && nd[t].epoch > 0 && nd[t].epoch < c->E))
			return 1;
	}
	return 0;
}

static int
group_stuck(void)
{
	int			best = -1,
				why = SK_NONE;

	for (int s = 0; s < N; s++)
		if (nd[s].up && nd[s].joined && !nd[s].pending && in_own_view(s) &&
			(best < 0 || nd[s].epoch > nd[best].epoch))
			best = s;
	if (best < 0)
		return SK_NOACTIVE;
	for (int i = 0; i < nd[best].mem.n; i++)
	{
		int			id = nd[best].mem.v[i],
					t = slot_of(id),
					w;

		if (t < 0 || (nd[t].id == id && !nd[t].up))
			continue;
		if (nd[t].id != id)
			w = SK_WIPED;		/* another node at its address */
		else if (!nd[t].pending && nd[t].epoch == nd[best].epoch && nd[t].eid == nd[best].eid)
			continue;
		else if (change_would_activate(t, id))
			w = SK_WAITING;		/* its proposer is down, cut off or short of marks */
		else if (nd[t].pending && !was_decided(nd[t].prop, nd[t].eid))
			w = SK_UNDECIDED;	/* it goes back once its proposer answers */
		else if (nd[t].pending && slot_of(nd[t].prop) >= 0 &&
				 nd[slot_of(nd[t].prop)].id != nd[t].prop)
			w = SK_ORPHAN;		/* its proposer's address answers for another node */
		else if (nd[t].epoch == 0)
			w = SK_SPOILT;		/* went back from its join (before 4c3967b: opened a window after the add looked) */
		else
			w = SK_BEHIND;		/* nothing will ever activate it */
		if (why == SK_NONE || w < why)
			why = w;
	}
	return why;
}

/*
 * A new cluster: N fresh nodes, the sequence created on the first (the
 * others may have one of the same name of their own), nothing in the
 * network, no window on record (the windows of an earlier cluster belong to
 * another group).
 */
static void
cluster_init(void)
{
	memset(nd, 0, sizeof nd);
	memset(jb, 0, sizeof jb);
	memset(cut, 0, sizeof cut);
	memset(flaky, 0, sizeof flaky);
	for (int k = 0; k < MAXN; k++)
		ag[k] = pr[k] = -1;
	nids = 0;
	nwin = 0;
	nmsg = 0;
	ndecided = 0;
	burst_until = 0;
	st.clusters++;
	st.last_change = step_no;
	draw_mix();
	for (int s = 0; s < N; s++)
	{
		nd[s].id = new_id(s);
		nd[s].up = 1;
		nd[s].job = -1;
		nd[s].prop = -1;
		nd[s].mem.n = 1;
		nd[s].mem.v[0] = nd[s].id;
		nd[s].has_seq = s > 0 && chance(p_own);
	}
	/* the seed node: the sequence is created there, then peers join */
	nd[0].joined = 1;
	nd[0].has_seq = 1;
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: allocator_sim [--seed=S] [--nodes=N (1..%d)] [--steps=T] [--agents=K (1..%d)]\n"
			"                     [--proposers=P (1..%d)] [--changes=both|add|remove]\n"
			"                     [--broken=noepoch|nocas|nopending|noquorum|fewmarks|anyepoch|blindrevert|\n"
			"                               inlinealone|nofreshcheck|noidcheck|nomovefrom|nodecidedid|\n"
			"                               recnoquorum|recnopromise]\n"
			"                     [--own[=0|1]] [--restart=STEPS] [--vary[=0|1]] [--older] [--norecovery]\n"
			"                     [--raisepromise]\n"
			"                     [--trace[=1|2]] [--show=LINES] [--dump]\n"
			"       allocator_sim --scenario=twonode|shrink|shrink5|joiners|fewmarks|\n"
			"                     superseded|freshrace|reinstall|behind|rejoin|lost0..lost4|\n"
			"                     splitprepare|lateproposer [--broken=...]\n", MAXN, MAXN, MAXN);
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
	long		cluster_start = 0;

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
				strcmp(v, "both") == 0 || strcmp(v, "add,remove") == 0 ? 3 : 0;
			if (!opt_ops)
				usage();
		}
		else if ((v = optval(argv[i], "--restart")))
			opt_restart = atol(v);
		else if ((v = optval(argv[i], "--vary")))
			opt_vary = atoi(v);
		else if (strcmp(argv[i], "--vary") == 0)
			opt_vary = 1;
		else if ((v = optval(argv[i], "--own")))
			opt_own = atoi(v);
		else if (strcmp(argv[i], "--own") == 0)
			opt_own = 1;
		else if (strcmp(argv[i], "--older") == 0)
			opt_older = 1;
		else if (strcmp(argv[i], "--norecovery") == 0)
			opt_norec = 1;
		else if (strcmp(argv[i], "--raisepromise") == 0)
			opt_raise = 1;
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
	if (N < 1 || N > MAXN || K < 1 || K > MAXN || NP < 1 || NP > MAXN ||
		nsteps < 0 || show_lines < 1 || show_lines > RING)
		usage();
	if (opt_scenario && N < 6)
		N = 6;					/* nodes a to f */
	if (opt_restart < 0)
		opt_restart = 5000 + 100L * N;
	if (opt_vary < 0)
		opt_vary = opt_restart > 0;
	if (opt_own < 0)
		opt_own = opt_vary;

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

	if (opt_scenario)
	{
		/* no faults but the scripted ones, every event shown */
		opt_vary = opt_own = 0;
		cluster_init();
		p_anom = p_read = 0;
		if (scenario(opt_scenario) < 0)
			usage();
		for (long i = ring_n > RING ? ring_n - RING : 0; i < ring_n; i++)
			printf("%s\n", ring[i % RING]);
		dump_nodes();
		config_line(stdout);
		printf(": no violation; %d agent passes had an error in phase two; %d nodes stuck\n",
			   sc_failed_passes, sc_stuck);
		return sc_failed_passes > 0 || sc_stuck > 0 ? 3 : 0;
	}

	cluster_init();
	for (step_no = 1; step_no <= nsteps; step_no++)
	{
		int			r = rnd(wsum);

		if (opt_restart > 0)
		{
			long		limit = coarse ? opt_restart / 4 : opt_restart;

			if (step_no - st.last_change > limit || step_no - cluster_start > 8 * limit)
			{
				int			stuck = group_stuck();

				st.stuck += stuck != SK_NONE;
				stuck_why[stuck]++;
				note(1, "%s: cluster %ld starts, all nodes fresh",
					 step_no - st.last_change > limit ? "no change decided for a while" :
					 "cluster old enough", st.clusters + 1);
				cluster_init();
				cluster_start = step_no;
			}
		}

		if (!coarse && step_no < burst_until && chance(0.9))
		{
			int			k = rnd(NP);

			if (pr[k] >= 0)
				job_step(&jb[pr[k]]);
			else
				pr[k] = change_start();
		}
		else
			event(r);
		for (int s = 0; s < N; s++)
			if (nd[s].joined && in_own_view(s) && nd[s].mem.n > members_max)
				members_max = nd[s].mem.n;
	}

	if (opt_dump)
		dump_nodes();
	config_line(stdout);
	printf(": windows=%ld (inline %ld) attempts=%ld lost=%ld no-majority=%ld pass-deaths=%ld"
		   " | changes decided=%ld failed=%ld (revert failures %ld, change deaths %ld)"
		   " phase two runs=%ld finished=%ld short of marks=%ld some not activated=%ld"
		   " superseded=%ld errors=%ld | recoveries reverted=%ld | settled %ld: decided known %ld,"
		   " taken on %ld, no-op %ld, failed %ld | largest membership %d"
		   " | crashes=%ld wipes=%ld delayed=%ld late=%ld lost-replies=%ld"
		   " joined with own windows=%ld | clusters=%ld stuck at restart=%ld",
		   st.windows + st.inl, st.inl, st.attempts, st.lost, st.nomaj, st.agent_crash,
		   st.ch_ok, st.ch_fail, st.revert_fail, st.prop_crash, st.p2_runs, st.p2_done,
		   st.p2_fewmarks, st.p2_actfail, st.p2_superseded, st.p2_errors, st.reverted,
		   st.rec_start, st.rec_known, st.rec_finish, st.rec_noop, st.rec_fail, members_max,
		   st.crashes, st.wipes, st.delayed, st.delivered, st.lost_replies, st.joined_own,
		   st.clusters, st.stuck);
	for (int k = 1; k < SK_COUNT; k++)
		printf("%s %s %ld", k == 1 ? " (" : ",", stuck_names[k], stuck_why[k]);
	printf("): OK\n");
	return 0;
}
