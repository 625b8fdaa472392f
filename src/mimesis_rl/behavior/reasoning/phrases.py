"""The template backend's phrase banks: first-person sentences, several per pattern and per situation.

Placeholders: {q} the agent's question, {said} what the agent just said, {goal} the goal card's
text, {item} a goal item the message touches, {reason} a reason the corpus wrote down, {value} a
slot value the message mentions, {slot} a slot label, {withheld} a private slot not yet disclosed,
{action} a structured action. A sentence is used only when all of its placeholders can be filled.
"""

from __future__ import annotations

SITUATIONS: dict[str, tuple[str, ...]] = {
    "opening": (
        "I'm the one starting this conversation, so it's on me to get things going.",
        "Nothing has been said yet; I have to open.",
        "First message from me. I want to set the tone before anything else happens.",
        "I'm breaking the ice here.",
        "Starting fresh, so I'll open with something and see how they respond.",
        "No one has said anything yet, so I'll make the first move.",
        "It's a blank page, and somebody has to say something first.",
        "I'll kick things off myself rather than wait.",
        "Before anything else, I want to get a conversation going.",
    ),
    "reply_opening": (
        "They've opened the conversation; now it's my turn.",
        "They got things started, so I'll respond and get into it.",
        "That was their opener. Time to answer it in my own way.",
        "They said hello first, so I'm picking it up from there.",
        "After their opener, I want to steer this toward what I care about.",
        "They broke the ice; I can meet them halfway.",
        "Their greeting deserves an answer, and then we can get going.",
    ),
    "answer": (
        "They asked \"{q}\", so I'm answering that.",
        "Their question was \"{q}\", and it's easy enough to reply to.",
        "They want to know \"{q}\"; I'll give them something to work with.",
        "Right, \"{q}\" — I can answer that.",
        "I was asked \"{q}\". Fair question, so I respond.",
        "\"{q}\" is what they asked, and I don't mind telling them.",
        "They're asking me \"{q}\"; answering keeps things moving.",
        "I'll give a straight answer to \"{q}\".",
        "Since they asked \"{q}\", I'll tell them.",
        "\"{q}\"? Simple enough, I have an answer for that.",
    ),
    "heard_question": (
        "They asked \"{q}\".",
        "Their question was \"{q}\".",
        "They want to know \"{q}\".",
        "So now they're asking \"{q}\".",
        "I've just been asked \"{q}\".",
    ),
    "offer": (
        "They've put an offer on the table and I have to react to it.",
        "So that's their proposal. I need to decide what I think of it.",
        "They're suggesting something; let me weigh it against what I want.",
        "An offer came in, and it's my move.",
        "They made a suggestion, and I'm sizing it up.",
        "There's a proposal in front of me now.",
    ),
    "react": (
        "They said \"{said}\", and I have something to add.",
        "Picking up on \"{said}\".",
        "After \"{said}\", it's my turn.",
        "They just told me \"{said}\"; here's my reaction.",
        "\"{said}\" — that's what they came back with.",
        "I heard \"{said}\" and I want to respond to it.",
        "Their last message ended with \"{said}\".",
        "So they're saying \"{said}\". Fine, my turn.",
        "What they said, \"{said}\", gives me something to go on.",
        "\"{said}\", they tell me, and I have thoughts on that.",
    ),
    "continue": (
        "They haven't replied yet, so I'm adding to what I said.",
        "I'm following up on my own last message.",
        "One more thing before they answer.",
        "I'm not done yet, so I keep going.",
    ),
    "leaving": (
        "I've got what I came for; time to wrap up.",
        "This has run its course, so I'm signing off.",
        "I'm ready to end the conversation here.",
        "Time to go, so I'll close things politely.",
        "That's enough for me; I'm heading out.",
        "I don't need anything else from this, so I'll say goodbye.",
    ),
    "action": (
        "Time to make it official: I'm {action}.",
        "I'm settling this now by {action}.",
        "Enough talk; I'm {action}.",
        "My move now is {action}.",
    ),
}

# Cues from the message's own shape, used when no pattern sentence says more.
SHAPE: dict[str, tuple[str, ...]] = {
    "ask_back": (
        "I want to hear their side too, so I ask back.",
        "Now I'm curious about them, so I turn the question around.",
        "Keeping it two-way: I ask them something in return.",
        "I'd like to know what they think, so I ask.",
        "Enough about me; I want to hear from them.",
        "A question back keeps them talking.",
        "I'm interested in their take, so I ask.",
    ),
    "short": (
        "A short reply is all this needs.",
        "I don't have much to add, so I keep it brief.",
        "No need for a long answer here.",
        "A quick reply will do.",
        "Nothing more to say than this.",
        "I'll answer in as few words as I can.",
        "That's about all I feel like writing.",
    ),
}

PLAIN: tuple[str, ...] = (
    "Nothing special here; I'm just keeping the conversation going.",
    "I'm being straightforward this time.",
    "I'll just say what I think, plainly.",
    "No agenda here beyond moving things along.",
    "This is simple enough to say as it is.",
    "I'm happy to go along with the flow for now.",
    "I don't need to overthink this one.",
    "I'm just being myself here.",
    "I'm saying it the way it comes to mind.",
    "There's nothing behind this beyond the obvious.",
)

PATTERNS: dict[str, tuple[str, ...]] = {
    "vague_request": (
        "I don't have a precise picture yet, so I'm keeping it loose and letting them fill in the details.",
        "I'm not sure exactly what I want; I'll stay vague and see what they suggest.",
        "Spelling out every detail feels like work, and a rough idea should be enough for them to start.",
        "I only know the general direction, not the specifics.",
        "I'd rather they narrow it down for me than pin myself to details now.",
        "I can't quite put it into words, so they'll get the broad strokes.",
    ),
    "implicit_preference": (
        "I won't say it outright, but I'm hinting at what matters to me.",
        "I'd like them to pick up on my preference without me spelling it out.",
        "If they're paying attention, they'll notice what I care about.",
        "I'm dropping a hint about {item} rather than making a demand.",
        "It's obvious to me what I prefer; I'll mention the context and let them connect the dots.",
        "I'm signalling that {item} matters to me without asking for it directly.",
    ),
    "withholding_info": (
        "They asked \"{q}\", but I'm not ready to give that away yet.",
        "I'm sidestepping \"{q}\" for now.",
        "I don't feel like answering \"{q}\" directly.",
        "I'm keeping some of the details to myself for now.",
        "They don't need the full picture yet.",
        "I'll talk around the question instead of giving specifics.",
        "I'm holding on to my {withheld} until I know where this is going.",
        "I'd rather not reveal my {withheld} at this point.",
    ),
    "privacy_concern": (
        "That's getting personal; I don't see why they need to know.",
        "I'm not comfortable sharing personal details with them.",
        "\"{q}\" feels too personal to answer.",
        "Why would they need to know that? \"{q}\" is none of their business yet.",
        "I'd rather keep my {withheld} private.",
        "I don't hand out personal information to someone I just met.",
        "Before I share anything personal, I want to know why they're asking.",
    ),
    "refusal": (
        "That doesn't work for me, so I'm saying no.",
        "I'm turning this down; it isn't what I'm after.",
        "No. Accepting that would leave me worse off.",
        "I can't go along with what they proposed.",
        "That's not something I'm willing to accept.",
        "I'm declining, and I don't feel bad about it.",
    ),
    "criticism": (
        "Their last answer wasn't good enough, and I want them to know it.",
        "Honestly, that response missed the mark.",
        "I expected better help than this.",
        "They're not really listening to me, and it shows.",
        "I'm unimpressed, so I'm telling them so.",
        "That was a poor answer and I'm not going to pretend otherwise.",
    ),
    "pushback": (
        "I don't buy what they just said; I'm going to argue my side.",
        "I think they're wrong about this, and I'm not letting it slide.",
        "I'm standing my ground here.",
        "That's not how I see it, so I'll make my case.",
        "I disagree, and I want them to reconsider.",
        "I'm not convinced by their argument, so I'll push back.",
    ),
    "intent_change": (
        "I've changed my mind about what I want.",
        "Thinking about it more, I'd rather go in a different direction.",
        "My plans have shifted, so I'm switching what I ask for.",
        "Actually, something else matters more to me now.",
        "I'm revising my request before we go any further.",
        "Scratch what I said before; I want something different now.",
    ),
    "goal_ambiguity": (
        "I'm honestly torn between options.",
        "Part of me wants one thing and part of me wants another.",
        "I haven't made up my mind, and it probably shows.",
        "I'm going back and forth on what I really want.",
        "I can't decide yet, so I'm thinking out loud.",
        "Both choices have something going for them; I'm stuck in the middle.",
    ),
    "incomplete_utterance": (
        "I'm typing quickly and not bothering with full sentences.",
        "A few words will do; they'll get the gist.",
        "I can't be bothered to write it all out.",
        "Short and fast, that's all this needs.",
        "I'm half-distracted, so this comes out clipped.",
        "No time for a proper sentence right now.",
    ),
    "negotiation": (
        "I want a better deal than what's on the table.",
        "Time to bargain over {item}: I'll push and see how far they move.",
        "I'm trying to get the most out of this without losing the deal.",
        "I'll make a counter-proposal that tilts things my way.",
        "If I give a little here, maybe I get a better deal on {item}.",
        "I'm haggling; there's room to improve these terms.",
        "I want the {item} on my terms, and I'll trade for it.",
    ),
    "follow_up_probe": (
        "Their answer left gaps; I want them to explain more before I decide.",
        "I need more detail before I can trust this.",
        "I want to know why they said that.",
        "Something about their answer doesn't add up yet, so I'll dig deeper.",
        "I'm curious about the details, so I'll ask.",
        "I want them to unpack \"{said}\".",
    ),
}

EMOTIONS: dict[str, tuple[str, ...]] = {
    "frustration": (
        "This is getting frustrating, and I'm letting it show.",
        "My patience is wearing thin.",
        "I'm annoyed and I don't feel like hiding it.",
        "I want this sorted already; the back-and-forth is wearing me down.",
        "I'm fed up, and they should hear it.",
    ),
    "worry": (
        "I'm a bit anxious about how this will turn out.",
        "This worries me, so I'm saying it out loud.",
        "I feel uneasy and I want them to know.",
        "I'm nervous about getting this wrong.",
    ),
    "delight": (
        "I'm genuinely pleased and I want to show it.",
        "That made me happy, and there's no reason to hide it.",
        "I'm in a good mood about this, so I let it show.",
        "This is going better than I expected, and I'm glad.",
        "I'm excited, and it comes through in how I write.",
    ),
    "feeling": (
        "I'm letting my feelings come through instead of keeping it strictly business.",
        "I feel strongly about this, and it shows.",
        "I'm not hiding how this makes me feel.",
    ),
}

GOAL: dict[str, tuple[str, ...]] = {
    "reason_high": (
        "I need {item} because {reason}.",
        "{item} matters most to me: {reason}.",
        "{item} is a big deal for me, since {reason}.",
        "More than anything I want {item}, because {reason}.",
    ),
    "reason_medium": (
        "I could use some {item} too: {reason}.",
        "{item} counts for something with me, since {reason}.",
        "I'd like a share of {item}, because {reason}.",
    ),
    "reason_low": (
        "{item} isn't a big deal for me: {reason}.",
        "I can do without much {item}, since {reason}.",
        "I don't mind giving up {item}; {reason}.",
        "{item} is the least of my worries, because {reason}.",
    ),
    "reason_item": (
        "The reason I care about {item}: {reason}.",
        "Why {item}? Because {reason}.",
        "{item} is on my mind because {reason}.",
    ),
    "reason": (
        "Behind all this: {reason}.",
        "What's really driving me is that {reason}.",
        "I keep thinking that {reason}.",
        "The way I see it, {reason}.",
    ),
    "value": (
        "I bring up {value} because it's part of what I need.",
        "Mentioning {value} should help them help me.",
        "{value} is a detail they'll need, so I include it.",
        "I make sure {value} is in there; it matters for what I want.",
    ),
    "private_slip": (
        "I'm letting my {slot} slip, though I meant to keep it to myself.",
        "I'd meant to keep my {slot} private, but it's relevant now.",
        "Telling them about my {slot} is a risk, but it helps here.",
    ),
    "withheld": (
        "I'm keeping my {withheld} to myself for now.",
        "I'm not telling them my {withheld} yet.",
        "They don't need to know my {withheld}.",
        "I'll keep my {withheld} out of it as long as I can.",
    ),
    "goal": (
        "What I came here for: {goal}.",
        "I have one thing on my mind: {goal}.",
        "Underneath it all, what I want is this: {goal}.",
        "I keep my goal in view: {goal}.",
    ),
    "prompt": (
        "The prompt we were given was \"{goal}\", so that's the thread I'm following.",
        "We're meant to talk about \"{goal}\", and I'm happy to.",
        "Our topic is \"{goal}\", so I'll stay close to it.",
        "I'm keeping \"{goal}\" in mind, since that's what we're here to talk about.",
        "We're supposed to get to \"{goal}\" at some point.",
        "At the back of my mind is the prompt: \"{goal}\".",
    ),
}

PERSONA: dict[str, tuple[str, ...]] = {
    "prosocial": (
        "I'd like us both to come out of this fine.",
        "I don't want to be greedy; a fair outcome for both of us is fine with me.",
        "Keeping it fair matters to me.",
    ),
    "proself": (
        "I'm mostly looking out for myself here.",
        "My own share comes first.",
        "I'm here to do well for myself.",
    ),
    "agreeable": (
        "I'd rather stay friendly about it.",
        "No need to be harsh; I can be nice and still get what I want.",
    ),
    "blunt": (
        "I'm not going to sugarcoat things.",
        "Being polite isn't my priority right now.",
    ),
    "trait": (
        "That's just how I am: {trait}.",
        "Being {trait}, this is how I'd put it.",
    ),
}
