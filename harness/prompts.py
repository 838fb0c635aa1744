"""Built-in prompt sets by category, and user prompt files (JSONL with id, category, prompt).

The first six categories span the content effect the first seed found (structured text drafts
well, open-ended text does not): factual summaries, open-ended opinion, code, rewriting/translation,
math reasoning, and extractive/repetitive text where drafting should shine.

The next six follow Spec-Bench's task categories (Xia et al. 2024: multi-turn conversation,
translation, summarization, question answering, math reasoning, retrieval-augmented generation):
`conversation` (one user message holding an earlier exchange and a follow-up that reuses it),
`translation`, `summarization`, `qa`, `math-reasoning` and `rag`. `summarization` (passages of
about 300 words) and `rag` (three numbered documents, or a 40-line function to edit) carry long
inputs whose phrases the answer copies, where prompt-lookup drafting should shine. The set
`spec-bench` names these six, `all` every category. Every prompt is written for this project
(none is taken from Spec-Bench, MT-bench or another dataset); each is under 700 SmolLM2 tokens
(550 with the chat template). The long ones (1,600 to 2,100 bytes) exceed the 1,024-position context
of the byte-level tiny test pairs, where the runner refuses them before generating.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core.errors import HarnessError


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    text: str


_PASSAGE = (
    "The water cycle moves water between the oceans, the air and the land. Heat from the sun "
    "evaporates water from seas and lakes; the vapour rises, cools and condenses into clouds; "
    "the clouds release rain or snow; and rivers and groundwater carry the water back to the sea."
)

# The Spec-Bench categories' prompt texts; BUILTIN below lists every set.

_CONVERSATION = [
    "Here is our conversation so far.\n\n"
    "Me: What should I pack for a three-day hiking trip in the mountains in late summer?\n\n"
    "You: For a three-day mountain hike in late summer, pack layers rather than one heavy coat: a light "
    "base layer, a warm fleece and a waterproof jacket. Bring sturdy, broken-in boots and one pair of wool "
    "socks per day plus a spare pair. Carry at least two litres of water and a way to purify more, plus "
    "easy food such as nuts, dried fruit and oat bars. Add a map and compass even if you use a phone, a "
    "small first-aid kit, sunscreen, a hat and a head torch with spare batteries. If you are camping, you "
    "will also need a tent, a sleeping bag rated for cold nights and a sleeping mat.\n\n"
    "Me: Thanks. Now turn your answer into a checklist table with three columns, Item, Quantity and Why, "
    "keeping your original wording where you can.",
    "Earlier you wrote this email for me:\n\n"
    "'Dear Ms Lindqvist,\n\n"
    "Thank you for meeting with our team last Thursday to discuss the new delivery schedule for the Harbour "
    "Street shop. As agreed, we will move the weekly delivery from Monday morning to Tuesday morning, starting "
    "on the first Tuesday of next month. Our driver will arrive between 7 and 8 am and will use the rear "
    "entrance on Cole Lane, as you suggested. Please let us know if the loading bay will be free at that time, "
    "or if we should plan for a different arrival window. We will also send you an updated order form by "
    "Friday, which includes the two new product lines we talked about. Thank you again for your time and help.\n\n"
    "Kind regards,\nSam Ortega'\n\n"
    "Please shorten that email to at most four sentences, keeping the dates, the times and the Cole Lane "
    "entrance exactly as written.",
    "Earlier in this chat I asked how binary search works, and you replied:\n\n"
    "'Binary search finds a value in a sorted list by repeatedly halving the part of the list that could "
    "contain it. Start with two positions, low at the first element and high at the last. Look at the middle "
    "element between them. If it equals the target, you are done. If the target is smaller, move high to just "
    "before the middle; if it is larger, move low to just after the middle. Repeat until you find the target "
    "or low passes high, which means the value is not in the list. Because the search range halves at every "
    "step, a list of n elements needs at most about log2(n) comparisons.'\n\n"
    "Now repeat that explanation, and after it add a worked example that searches for 23 in the list "
    "[3, 8, 15, 23, 42, 57, 64], showing low, high and the middle element at each step.",
    "You gave me this recipe a moment ago:\n\n"
    "'Red lentil soup (serves 4). Ingredients: 250 g red lentils, 1 onion, 2 carrots, 2 cloves of garlic, "
    "1 tablespoon of olive oil, 1 teaspoon of ground cumin, 1 litre of vegetable stock, the juice of half a "
    "lemon, salt and pepper. Method: Chop the onion and carrots and crush the garlic. Heat the oil in a large "
    "pan and cook the onion and carrots gently for 8 minutes. Add the garlic and cumin and cook for 1 minute "
    "more. Rinse the lentils, add them with the stock and bring to the boil. Simmer for 20 minutes, until the "
    "lentils are soft. Blend until smooth, stir in the lemon juice and season with salt and pepper.'\n\n"
    "Please rewrite the whole recipe for 10 people, scaling every quantity, and keep the method steps the same "
    "except where the quantities change.",
    "Earlier you suggested this plan for a day in a city I am visiting:\n\n"
    "'9:00 Start with breakfast at a cafe near the old town square.\n"
    "10:00 Walk through the old town and visit the cathedral; allow about an hour and a half.\n"
    "11:30 Cross the river to the market hall and browse the food stalls.\n"
    "13:00 Have lunch at the market.\n"
    "14:30 Visit the city museum, which has a good collection of maps and local crafts.\n"
    "16:30 Take the tram up to the hill park for the view over the city.\n"
    "18:30 Head back to the old town for dinner.'\n\n"
    "That works, but it will probably rain in the afternoon. Keep the morning exactly as it is and rewrite "
    "only the part after lunch so that everything is indoors, in the same format with times.",
]

_TRANSLATION = [
    "Translate the following French text into English:\n\n"
    "« Le marché du samedi s'installe sur la place de l'église dès sept heures du matin. Les producteurs de "
    "la région y vendent du fromage, du miel et des légumes de saison. Pensez à apporter votre propre sac, "
    "car les sacs en plastique ne sont plus distribués. »",
    "Translate the following text into German:\n\n"
    "'The museum will be closed on Monday for maintenance work. Guided tours will resume on Tuesday at ten "
    "o'clock. Tickets bought online remain valid for the whole week.'",
    "Translate the following Spanish text into English:\n\n"
    "'El tren con destino a Valencia saldrá del andén cuatro con veinte minutos de retraso. Los pasajeros con "
    "billete para el servicio anterior pueden viajar en este tren sin coste adicional. Rogamos disculpen las "
    "molestias.'",
    "Translate the following text into Italian:\n\n"
    "'Our bakery opens early every morning except Sunday. We bake our bread with flour from a mill in the "
    "next valley. If you would like to order a cake, please call us two days in advance.'",
    "Translate the following Portuguese text into English:\n\n"
    "'A biblioteca municipal vai organizar uma oficina de escrita para jovens durante as férias de verão. As "
    "inscrições são gratuitas, mas as vagas são limitadas. Os participantes devem trazer um caderno e uma "
    "caneta.'",
]

_REPORT = (
    "Brookfield Town Council: Annual Report on Footpaths and Cycle Routes\n\n"
    "During the past year the council's highways team inspected all 142 kilometres of public footpaths in "
    "the parish and the 38 kilometres of marked cycle routes. Inspections took place in two rounds, in March "
    "and in September, and recorded surface damage, blocked drains, overgrown hedges, missing signs and broken "
    "stiles. In total, 611 faults were logged, compared with 540 the previous year. Most of the increase came "
    "from the northern wards, where heavy rain in January washed out several gravel paths along the Mill Brook.\n\n"
    "Repairs were completed on 488 of the 611 faults by the end of December. The remaining 123 are scheduled "
    "for the first half of next year; 41 of them depend on agreement with private landowners, because the "
    "damaged sections cross farmland. The council resurfaced 3.2 kilometres of path with a bound gravel "
    "surface that drains better than loose stone, at a cost of 96,000 pounds, which was 8 percent below the "
    "budget set in the spring.\n\n"
    "The cycle network gained two new links. The first, a 900-metre shared path beside Station Road, connects "
    "the Elm Park estate to the railway station and opened in June. Automatic counters recorded an average of "
    "310 trips per weekday in its first three months. The second link, across the old quarry site, is built "
    "but will open only once the lighting is installed, which is expected in April.\n\n"
    "Residents submitted 214 reports through the online fault form, up from 150. The council aims to "
    "acknowledge every report within five working days and met that target for 93 percent of reports. A "
    "volunteer path warden scheme started in the autumn with 26 volunteers, who walk an assigned route each "
    "month and report problems directly.\n\n"
    "For the coming year the council proposes to keep the inspection budget unchanged, to add cycle parking "
    "at the library and the leisure centre, and to publish a quarterly map showing open faults and completed "
    "repairs."
)

_MANUAL = (
    "CG-200 Burr Coffee Grinder, Section 4: Grind Settings, Cleaning and Troubleshooting\n\n"
    "4.1 Choosing a grind setting. The grind dial has 30 numbered positions. Lower numbers give a finer grind "
    "and higher numbers a coarser one. As a starting point, use positions 3 to 6 for espresso, 10 to 14 for "
    "drip or filter coffee, 16 to 20 for a pour-over cone and 24 to 28 for a French press. Change the setting "
    "only while the motor is running, so that beans caught between the burrs do not jam the mechanism. If the "
    "coffee tastes sour or thin, move the dial two positions finer; if it tastes bitter or the water drains "
    "too slowly, move it two positions coarser.\n\n"
    "4.2 Dosing. Turn the timer knob to set the grinding time from 5 to 40 seconds. At a medium setting the "
    "grinder produces about 1.5 grams of ground coffee per second. The bean hopper holds 250 grams; for the "
    "most even grind, keep it at least one quarter full.\n\n"
    "4.3 Cleaning. Unplug the grinder before cleaning. Empty the hopper, turn it anticlockwise and lift it "
    "off. Remove the upper burr by pulling its wire handle straight up. Brush both burrs with the supplied "
    "brush; do not wash them with water, because moisture causes rust. Wipe the housing with a dry cloth. The "
    "ground coffee container and the hopper lid may be washed in warm soapy water, but they must be completely "
    "dry before refitting. With daily use, clean the burrs every two weeks.\n\n"
    "4.4 Troubleshooting. If the motor does not start, check that the hopper is locked in place: a safety "
    "switch stops the motor when it is loose. If the motor hums but does not turn, unplug the grinder, remove "
    "the upper burr and clear any stuck beans. If the grinder stops after long use, the thermal cut-out has "
    "operated; let it cool for 30 minutes before using it again. If the grind becomes uneven, the burrs may be "
    "worn; replacement burrs are part number CG-B20. For any other fault, contact the service centre listed "
    "on the warranty card."
)

_COMPANY = (
    "Marlow Cycle Works was founded in 1952 by Edith and Tomas Marlow in a rented workshop behind a bakery in "
    "the harbour town of Kelsby. Tomas had repaired bicycles for the postal service during his twenties, and "
    "Edith kept the accounts and designed the firm's first catalogue. In its first year the workshop built "
    "140 bicycles by hand, most of them sturdy delivery models with a large front basket, sold to shops and "
    "tradesmen in the surrounding villages.\n\n"
    "Demand grew steadily through the 1950s, and in 1961 the company moved to a purpose-built factory on the "
    "edge of town, where forty employees assembled frames on a short production line. The Marlow Roadster, "
    "introduced in 1964, became the firm's best-known model: a steel touring bicycle with mudguards, a chain "
    "guard and a three-speed hub. Within ten years it accounted for more than half of the company's sales.\n\n"
    "The 1970s were difficult. Cheaper imported bicycles reduced Marlow's share of the home market, and in "
    "1977 the company cut its workforce by a third. The founders' daughter, Ingrid Marlow, became managing "
    "director in 1980 and changed direction: instead of competing on price, the firm concentrated on repairs, "
    "spare parts and small batches of made-to-measure frames. A customer could visit the factory, be measured "
    "and collect a finished frame six weeks later.\n\n"
    "In 1995 the company opened a training school for bicycle mechanics, which has since awarded more than "
    "2,000 certificates. An electric-assist version of the Roadster followed in 2012, using a motor made by a "
    "supplier in the same region. Today Marlow Cycle Works employs 85 people, builds around 3,000 frames a "
    "year and still occupies the 1961 factory, although the original workshop behind the bakery is now a "
    "small museum run by volunteers. The company remains owned by the Marlow family, and its annual open day "
    "each May attracts several thousand visitors."
)

_PROTOCOL = (
    "Protocol 7: Measuring the pH of soil samples\n\n"
    "Purpose. This protocol describes how to measure the pH of soil samples in a 1:2.5 soil-to-water "
    "suspension with a calibrated bench pH meter. It is used for the teaching garden survey and for samples "
    "sent in by the allotment society.\n\n"
    "Materials. Air-dried soil sieved to 2 millimetres; deionised water; 50 millilitre plastic beakers with "
    "lids; a top-pan balance reading to 0.01 gram; a glass stirring rod or an orbital shaker; a pH meter with "
    "a combination electrode; buffer solutions of pH 4.00, 7.00 and 10.00; a wash bottle; soft tissue; and a "
    "record sheet.\n\n"
    "Preparation. Label one beaker for each sample, plus one beaker for a reference soil of known pH. Weigh "
    "10.00 grams of each sieved soil into its beaker and add 25 millilitres of deionised water. Close the lids "
    "and shake the beakers for 15 minutes on the orbital shaker, or stir each by hand for one minute every "
    "five minutes over the same period. Leave the suspensions to stand for 30 minutes so that the larger "
    "particles settle.\n\n"
    "Calibration. Switch on the meter at least ten minutes before use. Rinse the electrode with deionised "
    "water and blot it gently with tissue; do not wipe it. Calibrate with the pH 7.00 buffer first, then pH "
    "4.00, then pH 10.00, rinsing between buffers. Accept the calibration only if the slope shown by the meter "
    "is between 95 and 105 percent.\n\n"
    "Measurement. Stir each suspension briefly, place the electrode in the liquid just above the settled soil "
    "and wait until the reading has been stable for ten seconds. Record the pH to two decimal places. Rinse "
    "and blot the electrode between samples. Measure the reference soil at the start and after every ten "
    "samples; if its reading differs from the known value by more than 0.10, recalibrate and repeat the last "
    "ten samples.\n\n"
    "Finishing. Rinse the electrode, return it to its storage solution and pour the suspensions down the sink "
    "with plenty of water. Wash the beakers and leave them to dry."
)

_MINUTES = (
    "Minutes of the general meeting of the Alder Court Housing Cooperative, held on 14 March in the "
    "community room.\n\n"
    "Present: 31 members, representing 24 of the 40 households, so the meeting was quorate. The chair, Priya "
    "Nair, opened the meeting at 7.05 pm, and the minutes of the previous meeting were approved without "
    "changes.\n\n"
    "1. Roof repairs. The maintenance group reported that a surveyor had inspected the roofs of blocks B and C "
    "in February. Block B needs new flashing around two chimneys; block C needs about sixty slates replaced "
    "and one gutter renewed. Three contractors submitted quotes, ranging from 18,400 to 24,900 pounds. The "
    "group recommended the middle quote of 21,300 pounds from Hale and Sons, because it includes a ten-year "
    "guarantee and the work could start in May. After questions about scaffolding and access to the car park, "
    "the meeting approved the recommendation by 27 votes to 2, with 2 abstentions.\n\n"
    "2. Service charge. The treasurer, Daniel Okafor, explained that insurance and electricity for shared "
    "areas had risen by 12 percent. To cover the increase and the roof repairs without emptying the reserve "
    "fund, he proposed raising the monthly service charge from 85 to 92 pounds from July. Several members "
    "asked whether the rise could be phased. The meeting agreed to a rise to 89 pounds in July and to 92 "
    "pounds in January, by 25 votes to 6.\n\n"
    "3. Garden and bicycle store. The garden group thanked the eleven volunteers who cleared the rear garden "
    "in the autumn and asked for 600 pounds to build raised beds, which was agreed. A proposal to convert the "
    "unused laundry room into a secure bicycle store was welcomed; the maintenance group will obtain prices "
    "and report back at the next meeting.\n\n"
    "4. Any other business. Members were reminded that the fire alarm is tested every first Monday of the "
    "month at 10 am. The next general meeting will be held on 13 June. The chair closed the meeting at "
    "8.40 pm."
)

_SUMMARIZATION = [
    f"Summarize the following report for a residents' newsletter in about 120 words, keeping the key "
    f"figures.\n\n{_REPORT}",
    f"Summarize this section of a product manual as a short list of the most important instructions a new "
    f"owner needs.\n\n{_MANUAL}",
    f"Summarize the history of this company in one paragraph of no more than five sentences.\n\n{_COMPANY}",
    f"Summarize this laboratory protocol as a numbered list of its main steps, keeping the quantities and "
    f"times.\n\n{_PROTOCOL}",
    f"Summarize these meeting minutes: list each decision taken, with the vote where one is given, in at "
    f"most 100 words.\n\n{_MINUTES}",
]

_QA = [
    "What is the boiling point of water at sea level in degrees Celsius, and why is it lower at high "
    "altitude? Answer in two sentences.",
    "Which is the largest planet in the solar system, and is it a rocky planet or a gas giant?",
    "Who wrote the novel Pride and Prejudice, and in which century was it first published?",
    "Answer the question using the paragraph below.\n\n"
    "Paragraph: The lighthouse on Gull Point was built in 1871 from granite quarried on the island itself. "
    "Its first lamp burned paraffin and could be seen about 18 nautical miles away. In 1926 the lamp was "
    "replaced by an electric light powered by a diesel generator, and in 1958 the station was connected to "
    "the mainland grid by an underwater cable. The last resident keeper, Agnes Porter, retired in 1983, when "
    "the light became fully automatic. The keeper's cottage is now a small visitor centre that opens from May "
    "to September.\n\n"
    "Question: When did the lighthouse change to electric light, and how many years after that did the last "
    "resident keeper retire?",
    "Read this notice and answer the question.\n\n"
    "Notice: From 1 June, the Number 7 bus between Ashby and Dunmore will run every 20 minutes on weekdays "
    "between 7:00 and 19:00, and every 30 minutes in the evening until 23:00. On Saturdays the service runs "
    "every 30 minutes from 8:00 to 22:00. There is no Sunday service; passengers can use the Number 12, which "
    "runs hourly on Sundays from 9:00 and takes ten minutes longer. The journey on the Number 7 takes 35 "
    "minutes.\n\n"
    "Question: If I arrive at the Ashby stop at 8:10 on a Saturday, when does the next Number 7 leave, and "
    "when will I reach Dunmore?",
]

_MATH_REASONING = [
    "A bakery bakes 240 bread rolls in the morning. It sells three eighths of them before noon and 40 percent "
    "of the remaining rolls in the afternoon. In the evening it gives half of what is left to a food bank. How "
    "many rolls does the bakery keep? Reason step by step, then give the final answer on its own line.",
    "Two cyclists set off at the same time from towns 78 km apart and ride towards each other on the same "
    "road, one at 14 km/h and the other at 12 km/h. After how long do they meet, and how far from the first "
    "cyclist's town? Show your reasoning step by step.",
    "An empty tank holds 1,200 litres. Pipe A alone fills the tank in 6 hours, and pipe B alone empties a "
    "full tank in 10 hours. If both pipes are opened at the same time, how long does it take to fill the "
    "tank, and how many litres flow in through pipe A during that time? Work through it step by step.",
    "A jacket costs 80 dollars. The shop first takes 20 percent off, and then a coupon takes a further 15 "
    "percent off the reduced price. A friend says this is the same as 35 percent off. Is the friend right? "
    "Compute both final prices step by step and explain the difference.",
    "A mother is three times as old as her son. In 12 years she will be twice as old as he will be then. How "
    "old are they now, and how old will the mother be when her son is 30? Set up the equations and solve "
    "them step by step.",
]

_RAG_INSTRUCTIONS = (
    "Answer the question using only the documents below, and cite the documents you use by number, like [1] "
    "or [2]. If the documents do not contain the answer, say so."
)

_CODE_TO_EDIT = '''def summarize_readings(lines, low=-40.0, high=60.0, skip_header=True):
    readings = {}
    rejected = []
    seen = set()
    for number, line in enumerate(lines, 1):
        if skip_header and number == 1:
            continue
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(",")
        if len(parts) != 3:
            rejected.append((number, "wrong field count"))
            continue
        station, day, raw = (p.strip() for p in parts)
        if (station, day) in seen:
            rejected.append((number, "duplicate reading"))
            continue
        seen.add((station, day))
        try:
            value = float(raw)
        except ValueError:
            rejected.append((number, "not a number"))
            continue
        if value < low or value > high:
            rejected.append((number, "out of range"))
            continue
        readings.setdefault(station, []).append((day, value))
    summary = {}
    for station, values in readings.items():
        temps = [v for _, v in values]
        summary[station] = {
            "count": len(temps),
            "min": min(temps),
            "max": max(temps),
            "mean": round(sum(temps) / len(temps), 2),
            "first_day": min(d for d, _ in values),
            "last_day": max(d for d, _ in values),
        }
    return summary, rejected'''

_RAG = [
    f"{_RAG_INSTRUCTIONS}\n\n"
    "Document [1]: Westmere District Council collects household waste every week. General waste (black bin) "
    "and food waste (small green caddy) are collected on the same day each week. Mixed recycling (blue bin) "
    "and garden waste (brown bin) are collected on alternate weeks. Collection days depend on your street; "
    "you can find yours by entering your postcode on the council website. Bins must be at the kerb by 7 am on "
    "collection day and taken back in by the end of the day. Collections that fall on a public holiday move "
    "to the following day.\n\n"
    "Document [2]: The blue bin takes paper, cardboard, food tins, drink cans, plastic bottles, and plastic "
    "pots, tubs and trays. Rinse containers and flatten cardboard boxes. Glass bottles and jars must not go in "
    "the blue bin, because broken glass injures staff at the sorting centre; take them to a bottle bank "
    "instead. There are bottle banks at all supermarkets in the district and at the Ferry Lane recycling "
    "centre. Plastic bags and film should be taken back to supermarket collection points.\n\n"
    "Document [3]: Large items such as furniture, mattresses and washing machines can be collected from your "
    "home for a fee. The charge is 25 pounds for up to three items and 8 pounds for each further item. Book "
    "online or by phone at least five working days in advance. Items must be left outside your property, not "
    "inside a building or on a balcony. Alternatively, you can take bulky items free of charge to the Ferry "
    "Lane recycling centre, which is open from 8 am to 6 pm, Wednesday to Sunday. Furniture in good condition "
    "can be donated to the reuse shop on the same site.\n\n"
    "Question: I want to get rid of an old sofa and a box of empty glass jars. What are my options, and what "
    "will it cost?",
    f"{_RAG_INSTRUCTIONS}\n\n"
    "Document [1]: Tessera 3.2, released on 4 September, introduces offline mode. When offline mode is "
    "enabled, notes are stored on the device and synchronised automatically the next time a network "
    "connection is available. Offline mode is switched off by default. Version 3.2 also adds a dark theme, "
    "makes search faster in large notebooks and fixes a bug that sometimes duplicated attachments during "
    "import. Users of version 2.x must first update to 3.0 before installing 3.2.\n\n"
    "Document [2]: Most options are set under Settings > General. To enable offline mode, open Settings > "
    "Storage, switch on 'Keep notes on this device' and choose which notebooks to keep. Only the notebooks "
    "selected there are available offline. Offline copies use device storage: a notebook of 1,000 text notes "
    "needs about 20 megabytes, and attachments add their own size. Administrators of team accounts can "
    "disable offline mode for all members under Admin > Policies.\n\n"
    "Document [3]: In version 3.2, notes edited offline on two devices at the same time are not merged: when "
    "both devices reconnect, the later change is kept and the earlier one is saved as a copy named "
    "'conflict'. Images larger than 25 megabytes cannot be attached while offline. A fix for both problems is "
    "planned for version 3.3. The dark theme does not yet apply to the print preview.\n\n"
    "Question: How do I turn on offline mode in Tessera, and what problems should I know about before "
    "relying on it?",
    f"{_RAG_INSTRUCTIONS}\n\n"
    "Document [1]: All business travel must be approved by your line manager before booking. Train travel is "
    "the default for journeys under four hours; flights need approval from a department head. Book through "
    "the company travel portal so that tickets are charged to the company account. Standard class is used "
    "for all journeys, except that first class is allowed for train journeys longer than three hours when "
    "the employee works during the trip.\n\n"
    "Document [2]: For each night you stay away for work, you can claim up to 45 euros for meals; for a day "
    "trip longer than eight hours without an overnight stay, you can claim up to 20 euros. Alcohol cannot be "
    "claimed. Meals provided free at a conference or included in the hotel rate must be deducted from the "
    "allowance: breakfast counts as 10 euros, lunch as 15 euros and dinner as 20 euros. Hotels must be booked "
    "through the portal, at up to 150 euros per night.\n\n"
    "Document [3]: Submit expense claims in the finance system within 30 days of returning from your trip. "
    "Attach a photograph or scan of every receipt over 10 euros; for smaller amounts, a note of the date, "
    "place and amount is enough. Claims submitted late need written approval from your department head. "
    "Reimbursements are paid with the next monthly salary after the claim is approved. Questions about a "
    "claim can be sent to the finance help desk.\n\n"
    "Question: I am attending a three-day conference with two hotel nights, and the conference provides "
    "lunch on all three days. How much can I claim for meals in total, and by when must I submit my claim?",
    f"{_RAG_INSTRUCTIONS}\n\n"
    "Document [1]: Overnight camping in Harrow Ridge National Park is allowed only at the four designated "
    "sites: Cedar Lake, Pine Hollow, North Fork and Eagle Flat. Each site has numbered pitches, a water tap "
    "and composting toilets. A camping permit is required for every night and for every group of up to six "
    "people. Permits cost 12 dollars per night and can be bought online up to 90 days in advance, or at the "
    "visitor centre on the day if pitches remain. Campfires are allowed only in the metal fire rings "
    "provided.\n\n"
    "Document [2]: The park's lower trails are open all year. Higher areas, including Cedar Lake and Eagle "
    "Flat, are usually under snow from December to March. The Cedar Lake road and campsite open on 15 April "
    "each year, weather permitting, and close on 31 October. Pine Hollow and North Fork stay open all year, "
    "but their water taps are turned off from November to March, so winter campers must carry their own "
    "water.\n\n"
    "Document [3]: Bears are active in the park from April to November. At all campsites, food, rubbish and "
    "scented items such as toothpaste must be stored in the steel lockers provided or in an approved "
    "bear-resistant container. Never leave food in a tent. Keep at least 100 metres away from any bear and "
    "never approach cubs. Bear-resistant containers can be borrowed free of charge at the visitor centre. "
    "Report any bear seen near a campsite to a ranger at the visitor centre.\n\n"
    "Question: We are a group of four and want to camp for two nights at Cedar Lake in early April. Is that "
    "possible? If not, what would you suggest, and what will we need?",
    "Here is a Python function from our code base. Add type hints to its signature and a docstring that "
    "describes the arguments and the return value. Keep everything else exactly the same, and return the "
    "whole edited function.\n\n"
    f"```python\n{_CODE_TO_EDIT}\n```",
]

BUILTIN: dict[str, list[str]] = {
    "factual": [
        "Summarize how photosynthesis works in plants, step by step, covering light absorption, "
        "the light-dependent reactions, the Calvin cycle and the role of chlorophyll.",
        "Explain how a refrigerator keeps food cold. Describe the compressor, the condenser, the "
        "expansion valve and the evaporator in order.",
        "Give a structured overview of the human circulatory system: the heart's four chambers, "
        "arteries, veins, capillaries, and how oxygen reaches the cells.",
        "Summarize the main causes and effects of the Industrial Revolution in Britain in a short "
        "list of key points.",
        "Describe how vaccines train the immune system, covering antigens, antibodies, memory "
        "cells and why booster doses are sometimes needed.",
    ],
    "open-ended": [
        "What do you think makes a city a good place to live? Share your opinion and reasons.",
        "Is it better to be a specialist or a generalist in one's career? Argue for your view.",
        "Write a short reflection on why people enjoy stories that make them sad.",
        "If you could redesign the school day from scratch, what would you change and why?",
        "Some say technology makes us lonelier. Do you agree? Discuss freely.",
    ],
    "code": [
        "Write a Python function that returns the n-th Fibonacci number iteratively, with a docstring.",
        "Write a Python function that checks whether a string is a palindrome, ignoring case and spaces.",
        "Write a SQL query that returns the five customers with the highest total order amount from "
        "tables customers(id, name) and orders(id, customer_id, amount).",
        "Write a JavaScript function that removes duplicate values from an array and keeps their order.",
        "Write a Python class Stack with push, pop, peek and is_empty methods.",
    ],
    "rewrite": [
        "Translate into French: 'The library opens at nine in the morning and closes at six in the evening.'",
        "Rewrite this sentence in formal English: 'hey, can u send me the report asap, thx'.",
        "Translate into Spanish: 'My brother lives in a small house near the river with two cats.'",
        "Rewrite in the passive voice: 'The committee approved the new budget after a long debate.'",
        "Paraphrase in simpler words: 'The municipality intends to ameliorate public transportation.'",
    ],
    "math": [
        "A train travels 180 km in 2 hours and then 120 km in 1.5 hours. What is its average speed? "
        "Reason step by step.",
        "Solve for x: 3x + 7 = 25. Show each step.",
        "A shop sells pens at 3 for 2 dollars. How much do 18 pens cost? Explain your reasoning.",
        "What is the sum of the integers from 1 to 100? Explain the method.",
        "A rectangle has a perimeter of 30 cm and a length of 9 cm. What is its area? Work it out step by step.",
    ],
    "extractive": [
        f"Repeat the following passage exactly, word for word:\n\n{_PASSAGE}",
        f"Copy this text and then copy it again:\n\n{_PASSAGE}",
        "List the days of the week, then list them again in the same order, then once more.",
        "Count from 1 to 40, separated by commas.",
        f"Quote the first two sentences of this passage verbatim:\n\n{_PASSAGE}",
    ],
    "conversation": _CONVERSATION,
    "translation": _TRANSLATION,
    "summarization": _SUMMARIZATION,
    "qa": _QA,
    "math-reasoning": _MATH_REASONING,
    "rag": _RAG,
}

CATEGORIES = tuple(BUILTIN)
SPEC_BENCH = ("conversation", "translation", "summarization", "qa", "math-reasoning", "rag")
SETS = {"all": CATEGORIES, "spec-bench": SPEC_BENCH}  # names that expand to several categories
DEFAULT_PROMPTS = "factual"  # what `harness run` measures when --prompts is not given


def builtin(category: str) -> list[Prompt]:
    return [Prompt(f"{category}-{i + 1}", category, t) for i, t in enumerate(BUILTIN[category])]


def load_prompts(spec: str) -> list[Prompt]:
    """'factual,code', 'spec-bench', 'all', or a path to a JSONL file of {id, category, prompt} objects.

    Set names (SETS) expand to their categories; a category named twice is measured once."""
    p = Path(spec)
    if spec.endswith(".jsonl") or p.is_file():
        return _load_jsonl(p)
    given = [s.strip() for s in spec.split(",") if s.strip()]
    names = list(dict.fromkeys(c for n in given for c in SETS.get(n, (n,))))
    bad = [n for n in names if n not in BUILTIN]
    if bad or not names:
        raise HarnessError(
            f"unknown prompt set {', '.join(bad) or spec!r}; choose from: {', '.join(CATEGORIES)}, "
            f"{', '.join(SETS)}, or a .jsonl file"
        )
    return [pr for n in names for pr in builtin(n)]


def _load_jsonl(path: Path) -> list[Prompt]:
    if not path.is_file():
        raise HarnessError(f"prompt file not found: {path}")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            text = obj["prompt"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise HarnessError(f"{path}:{n}: expected a JSON object with a \"prompt\" field (and optional id, category)") from None
        out.append(Prompt(str(obj.get("id", f"{path.stem}-{n}")), str(obj.get("category", "custom")), str(text)))
    if not out:
        raise HarnessError(f"prompt file {path} holds no prompts")
    return out
