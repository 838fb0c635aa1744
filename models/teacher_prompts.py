"""The prompts written for this project that the target answers for its teacher data
(models/teacher_data.py): templates and topic lists, made into the `--prompts` template sets
(`mixed`, `explain`, `explain-wide`, `explain-3`). They resemble the harness's built-in categories
but are not the same prompts, and never name the measurement prompts' subjects (the measurement
prompts are never trained on).

It does not generate answers or the `self` set's requests the target writes (models/teacher_data.py).
"""

from __future__ import annotations

import random


TOPICS = [
    "the water cycle", "volcanoes", "the immune system", "black holes", "the printing press",
    "plate tectonics", "the French Revolution", "electric motors", "the human brain", "coral reefs",
    "the Roman Empire", "solar panels", "DNA replication", "earthquakes", "the stock market",
    "bees and pollination", "the internet", "antibiotics", "glaciers", "the moon landing",
    "nuclear fission", "rainforests", "the digestive system", "jet engines", "inflation",
    "the Renaissance", "batteries", "climate change", "the periodic table", "bridges",
    "the telephone", "tides", "the Great Wall of China", "vitamins", "wind turbines",
    "the nervous system", "democracy", "compilers", "bread baking", "the Silk Road",
    "hurricanes", "the heart", "recycling", "GPS satellites", "the cold war", "deserts",
    "lightning", "the ancient Egyptians", "microscopes", "the Olympic games", "sleep",
    "composting", "the speed of light", "cells and mitosis", "the Amazon river", "vaccines",
]
FACTUAL = [
    "Summarize the key facts about {t} in a short list.",
    "Explain how {t} works, step by step.",
    "Give a structured overview of {t}, with its main parts and what each does.",
    "Describe the causes and effects of {t} in a few key points.",
    "Write a short encyclopedia-style paragraph about {t}.",
    "What are the most important things a student should know about {t}?",
]
OPEN = [
    "What do you think is the most interesting thing about {t}? Explain your view.",
    "Write a short story that involves {t}.",
    "Write a short blog post about why {t} matters.",
]
CODE = [
    "Write a Python function that {c}. Include a docstring.",
    "Write a Python function that {c}, and explain how it works.",
    "Show a short Python example that {c}.",
]
CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "counts the words in a text",
    "merges two sorted lists", "computes the factorial of n", "removes duplicates from a list",
    "finds the largest element in a list", "reads a CSV file and prints each row",
    "returns the n-th Fibonacci number", "checks whether a string is a palindrome",
    "sorts a list of dictionaries by a key", "converts Celsius to Fahrenheit",
    "computes the average of a list of numbers", "flattens a nested list", "counts vowels in a string",
]
REWRITE = [
    "Rewrite this sentence in a formal tone: {s}",
    "Translate this sentence into French: {s}",
    "Paraphrase the following sentence: {s}",
    "Make this sentence shorter and clearer: {s}",
]
SENTENCES = [
    "hey, the meeting got moved to friday cause the boss is away.",
    "The cat sat on the warm windowsill and watched the birds all afternoon.",
    "We need to buy more milk, eggs and bread before the weekend.",
    "Our team finished the project two days early and under budget.",
    "the train was late again so i missed the start of the movie",
    "Please remember to turn off the lights when you leave the office.",
]
MATH = [
    "What is {a} times {b}? Show your work.",
    "A shop sells pencils at {a} cents each. How much do {b} pencils cost? Explain step by step.",
    "If a train travels {a} km in {b} hours, what is its average speed?",
    "Solve for x: {a}x + {b} = {c}. Show each step.",
    "What is {a} plus {b}, and is the result even or odd?",
]

# `--prompts explain`: longer factual requests that name the parts to cover, the way a user
# asking for an explanation often does. Never the measurement prompts' subjects (photosynthesis,
# refrigerators, the circulatory system, the Industrial Revolution, vaccines).
EXPLAIN = [
    "Explain how {t} works, covering {p}.",
    "Summarize how {t} works, step by step, covering {p}.",
    "Give a structured overview of {t}: {p}.",
    "Describe {t}, covering {p}, and why each matters.",
    "Explain {t} in order: {p}.",
    "Summarize the main ideas behind {t} in a short list of key points, covering {p}.",
]
EXPLAIN_TOPICS = [
    ("a car engine", ["the pistons", "the crankshaft", "the spark plugs", "the fuel injectors"]),
    ("cellular respiration", ["glycolysis", "the Krebs cycle", "the electron transport chain", "the role of oxygen"]),
    ("the water treatment process", ["coagulation", "sedimentation", "filtration", "disinfection"]),
    ("a nuclear power plant", ["the reactor core", "the control rods", "the steam generator", "the turbine"]),
    ("the respiratory system", ["the trachea", "the bronchi", "the alveoli", "the diaphragm"]),
    ("the French Revolution", ["its financial causes", "the storming of the Bastille", "the Reign of Terror", "its legacy"]),
    ("an airplane wing", ["lift", "drag", "the flaps", "the angle of attack"]),
    ("the kidneys", ["the nephrons", "filtration", "reabsorption", "urine formation"]),
    ("a computer processor", ["the control unit", "the arithmetic logic unit", "the registers", "the cache"]),
    ("the carbon cycle", ["respiration", "decomposition", "fossil fuels", "the oceans"]),
    ("antibiotic resistance", ["mutation", "natural selection", "gene transfer", "overuse of antibiotics"]),
    ("a hydroelectric dam", ["the reservoir", "the penstock", "the turbines", "the generator"]),
    ("the digestive system", ["the mouth", "the stomach", "the small intestine", "the large intestine"]),
    ("the fall of the Roman Empire", ["economic troubles", "military pressure", "political instability", "the split into east and west"]),
    ("a lithium-ion battery", ["the anode", "the cathode", "the electrolyte", "the separator"]),
    ("the nitrogen cycle", ["nitrogen fixation", "nitrification", "assimilation", "denitrification"]),
    ("the human eye", ["the cornea", "the lens", "the retina", "the optic nerve"]),
    ("blood clotting", ["platelets", "clotting factors", "fibrin", "how the clot dissolves"]),
    ("the American Civil War", ["its causes", "the main campaigns", "the Emancipation Proclamation", "Reconstruction"]),
    ("a washing machine", ["the drum", "the motor", "the water pump", "the control board"]),
    ("protein synthesis", ["transcription", "messenger RNA", "translation", "the ribosome"]),
    ("the greenhouse effect", ["sunlight", "infrared radiation", "greenhouse gases", "global temperatures"]),
    ("the endocrine system", ["the pituitary gland", "the thyroid", "the adrenal glands", "insulin"]),
    ("a solar cell", ["the silicon layers", "the p-n junction", "electron flow", "the inverter"]),
    ("the Cold War", ["its origins", "the arms race", "the Cuban Missile Crisis", "its end"]),
    ("how a bill becomes law", ["drafting", "committee review", "the votes", "signing or veto"]),
    ("the lymphatic system", ["lymph", "the lymph nodes", "the spleen", "white blood cells"]),
    ("an electric car", ["the battery pack", "the electric motor", "regenerative braking", "charging"]),
    ("the rock cycle", ["igneous rock", "sedimentary rock", "metamorphic rock", "weathering and erosion"]),
    ("the skeletal system", ["bones", "joints", "cartilage", "bone marrow"]),
    ("the printing press", ["movable type", "the ink", "the press mechanism", "its effects on society"]),
    ("an air conditioner", ["the refrigerant", "the compressor", "the coils", "the thermostat"]),
    ("mitosis", ["prophase", "metaphase", "anaphase", "telophase"]),
    ("the Great Depression", ["the stock market crash", "bank failures", "unemployment", "the New Deal"]),
    ("a microwave oven", ["the magnetron", "the waveguide", "water molecules", "the turntable"]),
    ("the nervous system", ["neurons", "synapses", "the spinal cord", "the brain"]),
    ("how the internet delivers a web page", ["DNS", "TCP/IP", "routers", "HTTP"]),
    ("plate tectonics", ["the lithosphere", "convection in the mantle", "plate boundaries", "earthquakes"]),
    ("the muscular system", ["skeletal muscle", "smooth muscle", "cardiac muscle", "muscle contraction"]),
    ("the Renaissance", ["its origins in Italy", "humanism", "art and science", "its spread across Europe"]),
    ("a jet engine", ["the intake", "the compressor", "the combustion chamber", "the turbine"]),
    ("the immune response to an infection", ["the skin barrier", "inflammation", "white blood cells", "fever"]),
    ("a nuclear fusion reactor", ["plasma", "magnetic confinement", "the fuel", "the challenges"]),
    ("the Scientific Revolution", ["Copernicus", "Galileo", "Newton", "the scientific method"]),
    ("a bicycle", ["the frame", "the gears", "the chain", "the brakes"]),
    ("the liver", ["bile production", "detoxification", "storing glycogen", "making proteins"]),
    ("inflation", ["demand", "money supply", "interest rates", "central banks"]),
    ("how soap cleans", ["surfactant molecules", "micelles", "oil and grease", "rinsing"]),
    ("the reproductive cycle of flowering plants", ["pollination", "fertilization", "seeds", "fruit"]),
    ("a smartphone camera", ["the lens", "the image sensor", "the image processor", "autofocus"]),
    ("the Age of Exploration", ["its motives", "navigation tools", "the major voyages", "its consequences"]),
    ("the weather", ["air pressure", "humidity", "fronts", "precipitation"]),
    ("an elevator", ["the cab", "the counterweight", "the hoist motor", "the safety brakes"]),
    ("the skin", ["the epidermis", "the dermis", "sweat glands", "melanin"]),
    ("a thermostat", ["the temperature sensor", "the set point", "the switch", "feedback"]),
    ("the theory of evolution", ["variation", "inheritance", "natural selection", "speciation"]),
    ("a 3D printer", ["the model file", "the extruder", "the print bed", "layer by layer building"]),
    ("the causes of World War I", ["militarism", "alliances", "imperialism", "the assassination in Sarajevo"]),
    ("a wind turbine", ["the blades", "the rotor", "the gearbox", "the generator"]),
    ("the ozone layer", ["ozone formation", "ultraviolet light", "CFCs", "the Montreal Protocol"]),
    ("the pancreas", ["insulin", "glucagon", "digestive enzymes", "blood sugar"]),
    ("the stock market", ["shares", "exchanges", "brokers", "prices"]),
    ("a search engine", ["crawling", "indexing", "ranking", "serving results"]),
    ("the ancient Egyptian civilization", ["the Nile", "the pharaohs", "the pyramids", "hieroglyphs"]),
    ("a heat pump", ["the outdoor unit", "the refrigerant loop", "the reversing valve", "efficiency"]),
    ("how the ear hears", ["the outer ear", "the eardrum", "the cochlea", "the auditory nerve"]),
    ("a compiler", ["the lexer", "the parser", "optimization", "code generation"]),
    ("the Moon's phases", ["sunlight", "the Moon's orbit", "the lunar cycle", "eclipses"]),
    ("bread making", ["flour", "yeast", "kneading", "baking"]),
    ("the hormone system during stress", ["adrenaline", "cortisol", "the fight-or-flight response", "recovery"]),
    ("the printing of money", ["central banks", "security features", "distribution", "inflation risks"]),
    ("a steam locomotive", ["the firebox", "the boiler", "the cylinders", "the driving wheels"]),
    ("the brain", ["the cerebrum", "the cerebellum", "the brainstem", "neurons"]),
]

# `--prompts explain-wide`: the explain templates and two more, over EXPLAIN_TOPICS and as many
# subjects again (EXPLAIN_TOPICS_2), so a head or draft trained on it sees each subject less often.
# Still never the measurement prompts' subjects.
EXPLAIN_WIDE = EXPLAIN + [
    "Explain how {t} works. Describe {p} in order.",
    "Summarize the main parts of {t} in a short list of key points: {p}.",
]
EXPLAIN_TOPICS_2 = [
    ("a dishwasher", ["the spray arms", "the heating element", "the detergent dispenser", "the drain pump"]),
    ("the lungs in exercise", ["breathing rate", "oxygen uptake", "carbon dioxide removal", "recovery"]),
    ("a hot air balloon", ["the envelope", "the burner", "buoyancy", "steering with the wind"]),
    ("the Krebs cycle", ["acetyl-CoA", "NADH", "ATP", "carbon dioxide"]),
    ("a hybrid car", ["the petrol engine", "the electric motor", "the battery", "regenerative braking"]),
    ("the Byzantine Empire", ["Constantinople", "Justinian", "the Orthodox Church", "its fall in 1453"]),
    ("a camera shutter", ["the aperture", "the shutter speed", "exposure", "motion blur"]),
    ("the thyroid gland", ["thyroxine", "metabolism", "iodine", "hypothyroidism"]),
    ("a rocket launch", ["the fuel and oxidizer", "thrust", "the stages", "reaching orbit"]),
    ("the Protestant Reformation", ["Martin Luther", "the printing press", "the Catholic response", "its wars"]),
    ("a water heater", ["the tank", "the heating element", "the thermostat", "the pressure relief valve"]),
    ("the bones of the hand", ["the carpals", "the metacarpals", "the phalanges", "the joints"]),
    ("an electric guitar", ["the strings", "the pickups", "the amplifier", "the effects pedals"]),
    ("the Apollo program", ["its goals", "the Saturn V rocket", "the Moon landings", "its legacy"]),
    ("a coffee machine", ["the water reservoir", "the pump", "the heating block", "the brew group"]),
    ("coral bleaching", ["the coral polyps", "symbiotic algae", "warming water", "recovery"]),
    ("the spinal cord", ["the vertebrae", "nerve roots", "reflexes", "signals to the brain"]),
    ("a wind-up clock", ["the mainspring", "the gear train", "the escapement", "the pendulum"]),
    ("the Mongol Empire", ["Genghis Khan", "its cavalry", "the trade routes", "its breakup"]),
    ("a laser", ["the gain medium", "stimulated emission", "the mirrors", "coherent light"]),
    ("the urinary system", ["the kidneys", "the ureters", "the bladder", "the urethra"]),
    ("a submarine", ["the ballast tanks", "the hull", "the periscope", "sonar"]),
    ("the Meiji Restoration", ["the end of the shogunate", "industrialization", "the new army", "its effects on Japan"]),
    ("a touchscreen", ["the glass layer", "capacitive sensing", "the controller", "multi-touch"]),
    ("the cell membrane", ["the lipid bilayer", "membrane proteins", "diffusion", "active transport"]),
    ("a traffic light system", ["the signal timer", "the sensors", "the controller", "pedestrian crossings"]),
    ("the Black Death", ["its spread", "the symptoms", "its death toll", "its effects on society"]),
    ("a fiber optic cable", ["the core", "the cladding", "total internal reflection", "signal repeaters"]),
    ("the white blood cells", ["neutrophils", "lymphocytes", "macrophages", "antibodies"]),
    ("a power grid", ["power stations", "transformers", "transmission lines", "balancing supply and demand"]),
    ("the Ottoman Empire", ["its rise", "Suleiman the Magnificent", "its administration", "its decline"]),
    ("a hard disk drive", ["the platters", "the read-write head", "the spindle motor", "the controller"]),
    ("the sense of taste", ["the taste buds", "the five basic tastes", "smell", "signals to the brain"]),
    ("a parachute", ["the canopy", "air resistance", "the suspension lines", "the landing"]),
    ("steel making", ["iron ore", "the blast furnace", "the Bessemer process", "alloys"]),
    ("a vacuum cleaner", ["the motor", "the fan", "the filter", "the dust bag"]),
    ("the menstrual cycle", ["the follicular phase", "ovulation", "the luteal phase", "hormones"]),
    ("a radio", ["the antenna", "the tuner", "demodulation", "the speaker"]),
    ("the Aztec civilization", ["Tenochtitlan", "their farming", "their religion", "the Spanish conquest"]),
    ("an LED light", ["the semiconductor", "electrons and holes", "the light color", "efficiency"]),
    ("the food chain", ["producers", "consumers", "decomposers", "energy transfer"]),
    ("a sewing machine", ["the needle", "the bobbin", "the feed dogs", "the stitch"]),
    ("the Russian Revolution", ["the February Revolution", "the Bolsheviks", "Lenin", "the civil war"]),
    ("a quartz watch", ["the battery", "the quartz crystal", "the circuit", "the stepper motor"]),
    ("the placenta", ["nutrient exchange", "oxygen delivery", "hormones", "the umbilical cord"]),
    ("a canal lock", ["the gates", "the chamber", "the water levels", "the boats"]),
    ("the Ming dynasty", ["its founding", "the Forbidden City", "the voyages of Zheng He", "its fall"]),
    ("a smoke detector", ["the sensor", "ionization", "the alarm", "the battery"]),
    ("the hormone insulin", ["the pancreas", "blood glucose", "cells taking up sugar", "diabetes"]),
    ("a car's brakes", ["the brake pedal", "the hydraulic fluid", "the calipers", "the brake pads"]),
    ("the Greek city-states", ["Athens", "Sparta", "democracy", "the Persian Wars"]),
    ("a database", ["tables", "queries", "indexes", "transactions"]),
    ("the water table", ["aquifers", "groundwater", "wells", "recharge from rain"]),
    ("a nuclear submarine reactor", ["the fuel", "the coolant", "the steam turbine", "the shielding"]),
    ("the life cycle of a star", ["the nebula", "the main sequence", "the red giant", "the white dwarf"]),
    ("a printer", ["the paper feed", "the print head", "the ink or toner", "the controller"]),
    ("the teeth", ["the enamel", "the dentin", "the pulp", "the roots"]),
    ("a crane", ["the boom", "the counterweight", "the hoist", "the operator cab"]),
    ("the Enlightenment", ["reason", "Voltaire", "Rousseau", "its influence on revolutions"]),
    ("an operating system", ["the kernel", "processes", "memory management", "the file system"]),
    ("the sense of smell", ["odor molecules", "the olfactory receptors", "the olfactory bulb", "memory"]),
    ("a tidal power station", ["the barrage", "the tides", "the turbines", "the environmental effects"]),
    ("the Incan Empire", ["the Andes", "their roads", "their record keeping", "the Spanish conquest"]),
    ("a fuel cell", ["hydrogen", "the membrane", "the catalyst", "electricity and water"]),
    ("blood types", ["antigens", "the ABO system", "the Rh factor", "transfusions"]),
    ("a rollercoaster", ["the lift hill", "potential energy", "kinetic energy", "the brakes"]),
    ("the Vikings", ["their ships", "their raids", "their trade", "their settlements"]),
    ("a web browser", ["the address bar", "the rendering engine", "JavaScript", "the cache"]),
    ("the adrenal glands", ["adrenaline", "cortisol", "aldosterone", "the stress response"]),
    ("a geothermal power plant", ["the hot rock", "the wells", "the steam", "the turbine"]),
]


# `--prompts explain-3`: the explain-wide templates over a third list of subjects only, none in the
# first two lists and none a measurement prompt's, for a head already trained on those two.
EXPLAIN_TOPICS_3 = [
    ("a lighthouse", ["the lamp", "the Fresnel lens", "the rotation mechanism", "the light pattern"]),
    ("the Silk Road trade", ["the caravans", "the goods traded", "the oasis cities", "the spread of ideas"]),
    ("a pressure cooker", ["the sealed lid", "the steam pressure", "the safety valve", "the higher boiling point"]),
    ("the small intestine", ["the villi", "enzymes from the pancreas", "nutrient absorption", "peristalsis"]),
    ("a nuclear reactor meltdown", ["the loss of cooling", "decay heat", "the fuel rods", "containment"]),
    ("the Hundred Years' War", ["the English claim to the French throne", "the longbow", "Joan of Arc", "the outcome"]),
    ("a mobile phone network", ["the cell towers", "handover between cells", "the radio spectrum", "the core network"]),
    ("the rainforest ecosystem", ["the canopy", "the understory", "the forest floor", "biodiversity"]),
    ("a helicopter", ["the main rotor", "the tail rotor", "the swashplate", "collective and cyclic control"]),
    ("the formation of clouds", ["evaporation", "rising air", "condensation nuclei", "cooling and saturation"]),
    ("a credit card payment", ["the card reader", "the payment network", "the issuing bank", "authorization"]),
    ("the Norman conquest of England", ["William of Normandy", "the Battle of Hastings", "the Domesday Book", "castles"]),
    ("a suspension bridge", ["the towers", "the main cables", "the suspenders", "the anchorages"]),
    ("the human ear's balance system", ["the semicircular canals", "the fluid inside them", "the hair cells", "the vestibular nerve"]),
    ("an electric kettle", ["the heating element", "the thermostat", "the automatic switch-off", "the water level"]),
    ("the French and Indian War", ["the colonial rivalry", "the Ohio Valley", "the Treaty of Paris", "its costs for Britain"]),
    ("a barcode scanner", ["the laser or camera", "the bars and spaces", "decoding", "the product database"]),
    ("the process of digestion in the stomach", ["gastric acid", "pepsin", "the stomach lining", "churning"]),
    ("a sailboat", ["the sails", "the keel", "the rudder", "sailing against the wind"]),
    ("the Trojan War legend", ["Helen of Troy", "the siege", "the wooden horse", "Homer's epics"]),
    ("a dam's spillway", ["the reservoir level", "the gates", "the chute", "energy dissipation"]),
    ("earthquake-resistant buildings", ["base isolation", "dampers", "flexible frames", "building codes"]),
    ("a toaster", ["the heating wires", "the timer", "the spring-loaded tray", "browning"]),
    ("the Roman Republic", ["the Senate", "the consuls", "the assemblies", "the rise of Caesar"]),
    ("a speaker", ["the cone", "the voice coil", "the magnet", "sound waves"]),
    ("the life cycle of a butterfly", ["the egg", "the caterpillar", "the chrysalis", "the adult"]),
    ("a satellite in orbit", ["launch", "orbital speed", "gravity", "solar panels"]),
    ("the Gold Rush in California", ["the discovery at Sutter's Mill", "the forty-niners", "mining towns", "lasting effects"]),
    ("a water filter", ["activated carbon", "the membrane", "sediment removal", "replacement"]),
    ("the human liver's detox role", ["enzymes", "breaking down toxins", "bile", "the blood supply"]),
    ("a diesel engine", ["compression ignition", "the fuel injection", "the turbocharger", "torque"]),
    ("the partition of India", ["the end of British rule", "the new borders", "migration", "the consequences"]),
    ("an escalator", ["the steps", "the chain drive", "the handrail", "the motor"]),
    ("the formation of mountains", ["colliding plates", "folding", "faulting", "erosion"]),
    ("a router in a home network", ["IP addresses", "Wi-Fi", "packet forwarding", "the modem"]),
    ("the Spanish Armada", ["Philip II", "the English fleet", "the storms", "the aftermath"]),
    ("a blender", ["the motor", "the blades", "the jar", "speed settings"]),
    ("the sense of touch", ["receptors in the skin", "pressure", "temperature", "signals to the brain"]),
    ("a catalytic converter", ["the honeycomb core", "platinum catalysts", "exhaust gases", "cleaner emissions"]),
    ("the Aztec capital Tenochtitlan", ["the lake setting", "the causeways", "the temples", "the Spanish conquest"]),
    ("a solar water heater", ["the collector", "the storage tank", "the pump", "backup heating"]),
    ("the water supply of a city", ["reservoirs", "treatment", "pumping stations", "pipes"]),
    ("an electric toothbrush", ["the motor", "the rechargeable battery", "the brush head", "the timer"]),
    ("the Chinese Cultural Revolution", ["Mao Zedong", "the Red Guards", "the purges", "the legacy"]),
    ("a kidney dialysis machine", ["the dialyzer", "the blood circuit", "the dialysate", "waste removal"]),
    ("the formation of soil", ["weathering of rock", "organic matter", "soil layers", "living organisms"]),
    ("a gas stove", ["the gas valve", "the burner", "the igniter", "flame control"]),
    ("the unification of Germany", ["Bismarck", "the wars with Denmark, Austria and France", "the German Empire", "nationalism"]),
    ("a lock and key", ["the pin tumblers", "the key cuts", "the shear line", "turning the cylinder"]),
    ("the nervous reflex arc", ["the receptor", "the sensory neuron", "the spinal cord", "the motor neuron"]),
    ("a metro train system", ["the tracks", "the electric power", "the signalling", "the stations"]),
    ("the migration of birds", ["the seasons", "navigation", "energy reserves", "the routes"]),
    ("a microwave communication link", ["the antennas", "line of sight", "the frequencies", "the repeaters"]),
    ("the Opium Wars", ["the tea trade", "opium imports", "the Treaty of Nanking", "Hong Kong"]),
    ("a garbage truck", ["the hopper", "the compactor", "the hydraulic system", "unloading"]),
    ("the human spine", ["the vertebrae", "the discs", "the spinal cord", "posture"]),
    ("an inkjet printer", ["the print head", "the ink cartridges", "the paper feed", "tiny droplets"]),
    ("the rise of the Mali Empire", ["Sundiata", "the gold trade", "Mansa Musa", "Timbuktu"]),
    ("a wave power generator", ["the buoy", "the motion of the waves", "the generator", "the cable to shore"]),
    ("the formation of fossils", ["burial in sediment", "mineral replacement", "rock layers", "discovery"]),
    ("a car's airbag", ["the crash sensor", "the inflator", "the bag", "the timing"]),
    ("the League of Nations", ["its founding", "its members", "its failures", "the United Nations after it"]),
    ("a digital thermometer", ["the sensor", "the circuit", "the display", "accuracy"]),
    ("the human tongue", ["the taste buds", "the muscles", "speech", "swallowing"]),
    ("a cable car", ["the haul rope", "the cabins", "the bull wheel", "the stations"]),
    ("the Hanseatic League", ["the merchant towns", "the Baltic trade", "the kontors", "its decline"]),
    ("an induction cooktop", ["the coil", "the magnetic field", "the pan", "heating"]),
    ("the growth of a seed", ["germination", "the root", "the shoot", "the first leaves"]),
    ("a password manager", ["the vault", "the master password", "encryption", "autofill"]),
    ("the Suez Canal", ["its construction", "the route", "shipping", "the 1956 crisis"]),
    ("a forklift", ["the mast", "the forks", "the hydraulic lift", "the counterweight"]),
    ("the hair on the human body", ["the follicle", "the growth cycle", "keratin", "its roles"]),
    ("a telescope", ["the objective lens or mirror", "the eyepiece", "the mount", "magnification"]),
    ("the Mexican Revolution", ["Porfirio Diaz", "Zapata and Villa", "the constitution of 1917", "land reform"]),
    ("a sprinkler system", ["the pipes", "the heat-sensitive bulbs", "the water supply", "fire control"]),
    ("tsunamis", ["the undersea earthquake", "the wave speed", "the run-up on shore", "warning systems"]),
    ("a flash drive", ["the flash memory chips", "the controller", "the USB connector", "writing and erasing"]),
    ("the Habsburg monarchy", ["the dynasty", "marriages and alliances", "the empire's peoples", "its end in 1918"]),
    ("a paper mill", ["the wood pulp", "the paper machine", "pressing and drying", "recycling"]),
    ("the blood sugar balance", ["glucose", "the liver's stores", "meals", "exercise"]),
    ("a smart thermostat", ["the sensors", "the schedule", "learning", "remote control"]),
    ("the Berlin Wall", ["its building in 1961", "the divided city", "escape attempts", "its fall in 1989"]),
    ("a drone", ["the four rotors", "the flight controller", "the battery", "the camera"]),
    ("the human kidney's nephron", ["the glomerulus", "the tubule", "reabsorption", "urine"]),
    ("a recycling plant", ["sorting", "shredding", "melting", "new products"]),
    ("the Tang dynasty", ["the capital Chang'an", "poetry", "trade", "its decline"]),
    ("a fire extinguisher", ["the pressurized tank", "the agent", "the nozzle", "the classes of fire"]),
    ("volcanic eruptions", ["the magma chamber", "gas pressure", "lava and ash", "the types of volcano"]),
    ("an electric scooter", ["the hub motor", "the battery", "the controller", "the brakes"]),
    ("the Crusades", ["the call of Pope Urban II", "Jerusalem", "the crusader states", "the effects on Europe"]),
    ("a dairy farm", ["the cows", "milking", "cooling the milk", "transport to the dairy"]),
    ("the eye's lens and focus", ["the cornea", "the lens", "the ciliary muscles", "the retina"]),
    ("a hearing aid", ["the microphone", "the amplifier", "the receiver", "the battery"]),
    ("the Atlantic slave trade", ["the triangular trade", "the Middle Passage", "the plantations", "abolition"]),
    ("a snow plow", ["the blade", "the spreader", "the truck", "road safety"]),
    ("glaciers shaping land", ["ice flow", "erosion", "moraines", "valleys"]),
    ("a spreadsheet", ["cells", "formulas", "charts", "recalculation"]),
    ("the Qin dynasty", ["the first emperor", "standardization", "the Great Wall", "the terracotta army"]),
    ("a welding machine", ["the arc", "the electrode", "the shielding gas", "the joint"]),
    ("the muscles during a sprint", ["muscle fibres", "ATP", "lactic acid", "fatigue"]),
    ("a ship's engine room", ["the main engine", "the propeller shaft", "the generators", "the fuel"]),
    ("the Phoenicians", ["the city of Tyre", "seafaring", "the alphabet", "the colonies"]),
    ("a key fob for a car", ["the radio signal", "the rolling code", "the receiver in the car", "the battery"]),
    ("river deltas", ["the sediment", "the distributaries", "the wetlands", "flooding"]),
    ("an audio amplifier", ["the input signal", "the transistors", "the power supply", "the output"]),
    ("the Glorious Revolution", ["James II", "William and Mary", "the Bill of Rights", "Parliament's power"]),
    ("a cement plant", ["limestone", "the kiln", "clinker", "grinding"]),
    ("the body's temperature control", ["the hypothalamus", "sweating", "shivering", "blood flow to the skin"]),
    ("a QR code", ["the square modules", "the finder patterns", "error correction", "the scanner"]),
    ("the Inca road system", ["the mountain roads", "the rope bridges", "the relay runners", "the way stations"]),
    ("a hydraulic press", ["the two pistons", "the fluid", "Pascal's principle", "the force"]),
    ("desert ecosystems", ["water scarcity", "plants that store water", "nocturnal animals", "temperature swings"]),
    ("an email being sent", ["the mail client", "the SMTP server", "DNS lookup", "the recipient's inbox"]),
    ("the Dutch Golden Age", ["trade", "the East India Company", "painting", "science"]),
    ("a car's transmission", ["the gears", "the clutch", "the gearbox", "the drive shaft"]),
    ("the human appendix and large intestine", ["the colon", "water absorption", "gut bacteria", "the appendix"]),
    ("a seismograph", ["the mass", "the frame", "the recording", "measuring earthquakes"]),
]

TEMPLATE_SETS = ("mixed", "explain", "explain-wide", "explain-3")  # made from the lists above


def make_prompts(n: int, seed: int = 0, prompt_set: str = "mixed") -> list[str]:
    """n chat prompts: "mixed" over categories (about half factual, like the default measurement),
    "explain", factual explanations that name their parts (EXPLAIN x EXPLAIN_TOPICS), or
    "explain-wide", the same over twice the subjects (EXPLAIN_WIDE x both topic lists), or "explain-3",
    EXPLAIN_WIDE over a third list of subjects only (EXPLAIN_TOPICS_3). (The `self` set:
    models/teacher_data.py's self_requests.)"""
    if prompt_set not in TEMPLATE_SETS:
        raise ValueError(f"unknown prompt set {prompt_set!r}: one of {', '.join(TEMPLATE_SETS)}")
    rng = random.Random(seed)
    if prompt_set.startswith("explain"):
        templates, topics = {"explain": (EXPLAIN, EXPLAIN_TOPICS),
                             "explain-wide": (EXPLAIN_WIDE, EXPLAIN_TOPICS + EXPLAIN_TOPICS_2),
                             "explain-3": (EXPLAIN_WIDE, EXPLAIN_TOPICS_3)}[prompt_set]
        out = []
        for _ in range(n):
            topic, parts = rng.choice(topics)
            parts = rng.sample(parts, rng.randint(3, len(parts)))
            out.append(rng.choice(templates).format(t=topic, p=", ".join(parts[:-1]) + " and " + parts[-1]))
        return out
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.5:
            out.append(rng.choice(FACTUAL).format(t=rng.choice(TOPICS)))
        elif r < 0.65:
            out.append(rng.choice(CODE).format(c=rng.choice(CODE_TASKS)))
        elif r < 0.75:
            out.append(rng.choice(REWRITE).format(s=rng.choice(SENTENCES)))
        elif r < 0.85:
            a, b = rng.randint(2, 99), rng.randint(2, 40)
            out.append(rng.choice(MATH).format(a=a, b=b, c=a * rng.randint(1, 9) + b))
        else:
            out.append(rng.choice(OPEN).format(t=rng.choice(TOPICS)))
    return out
